-- A tiny GPT learns the copy task: after a fixed number of steps (not a fixed time) it
-- copies 8 symbols with at least 95% of answer tokens right on fresh examples.
package.path = (arg[0]:match("(.*/)") or "./") .. "../?.lua;" .. package.path
local T = require("harness")

T.test("tiny GPT learns to copy in 150 steps", function()
  lab.manual_seed(7)
  local task = lab.data.copy_task(8, 10)
  local model = lab.nn.GPT { vocab = task.vocab, d_model = 64, n_layer = 2, n_head = 4, seq_len = task.seq_len }
  local result = lab.train.run { model = model, batch = function() return task.batch(32) end, steps = 150, lr = 3e-3,
    warmup = 20, clip = 1.0, quiet = true }
  model:eval()
  local ids, tg = task.batch(256)
  local token_acc, seq_acc = lab.data.accuracy(model, ids, tg)
  print(string.format("copy task after 150 steps: loss %.4f, token accuracy %.1f%%, sequence accuracy %.1f%%",
    result.loss, 100 * token_acc, 100 * seq_acc))
  T.ok(token_acc >= 0.95, string.format("token accuracy %.3f >= 0.95", token_acc))
end)

T.test("same seed, same losses (determinism)", function()
  local function run()
    lab.manual_seed(11)
    local task = lab.data.add_task(2)
    local model = lab.nn.GPT { vocab = task.vocab, d_model = 32, n_layer = 1, n_head = 2, seq_len = task.seq_len }
    local losses = {}
    lab.train.run { model = model, batch = function() return task.batch(16) end, steps = 5, lr = 1e-3, quiet = true,
      on_step = function(step, loss) losses[step + 1] = loss end }
    return losses
  end
  local a, b = run(), run()
  for i = 1, 5 do T.eq(a[i], b[i], "loss of step " .. i) end
end)

T.test("state_dict round trip through .npy files", function()
  local m = lab.nn.GPT { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8 }
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  for name, t in pairs(m:state_dict()) do t:save_npy(dir .. "/" .. name .. ".npy") end
  local m2 = lab.nn.GPT { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8 }
  local sd = {}
  for name in pairs(m2:state_dict()) do sd[name] = lab.load_npy(dir .. "/" .. name .. ".npy") end
  m2:load_state_dict(sd)
  local ids = lab.randint(0, 16, { 2, 8 })
  T.eq(lab.max_abs_diff(m(ids), m2(ids)), 0, "same outputs after loading")
  os.execute("rm -rf " .. dir)
  sd["wte.weight"] = lab.zeros(3, 3)
  T.raises(function() m2:load_state_dict(sd) end, "wte.weight", "[3, 3]", "[16, 16]")
end)

T.finish()
