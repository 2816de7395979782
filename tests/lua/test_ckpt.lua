-- Checkpoints: resuming continues bit for bit the same trajectory (losses and parameters),
-- including the RNG stream (dropout and data); a save that fails half-way leaves the previous
-- checkpoint whole and loadable; a wrong model is refused with the names and shapes; values
-- that cannot be stored are refused before anything on disk changes; `latest` moves last.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local common = require("ckpt_common")
local r = lab.dist.rank()
local dir = common.tmpdir("ckpt-test")
local path = dir .. "/ckpt"

local cfg = { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8, dropout = 0.1 }
local function fresh()
  lab.manual_seed(1)
  local m = lab.ddp.wrap(T.place(lab.nn.GPT(cfg)))
  return m, lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
end
-- one language-model step on the batch drawn from `seed` (opt may be a ZeRO engine); with
-- dropout_offset, dropout draws from a stream that depends only on the step
local function lm_step(m, opt, seed, dropout_offset)
  lab.manual_seed(seed)
  local ids = T.place(lab.randint(0, 16, { 2, 8 }))
  if dropout_offset then lab.set_rng_state({ seed = 77, offset = dropout_offset }) end
  opt:zero_grad()
  local _, loss = m(ids, ids)
  loss:backward()
  opt:step()
  return loss:item()
end
local function step(m, opt, k) return lm_step(m, opt, 1000 + k, k * 4096) end

T.test("resume continues the same trajectory bit for bit", function()
  local m, opt = fresh()
  local straight = {}
  for k = 1, 6 do straight[k] = step(m, opt, k) end
  local a, aopt = fresh()
  for k = 1, 3 do step(a, aopt, k) end
  lab.ckpt.save(path, { model = a.module, optimizer = aopt, step = 3, extra = { note = "after 3" } })
  local b, bopt = fresh()
  local st = lab.ckpt.load(path, { model = b.module, optimizer = bopt })
  T.eq(st.step, 3)
  T.eq(st.extra.note, "after 3")
  for k = 4, 6 do T.eq(step(b, bopt, k), straight[k], "loss of step " .. k) end
  for i, p in ipairs(b:parameters()) do T.eq(lab.max_abs_diff(p, m:parameters()[i]), 0, "parameter " .. i) end
end)

-- `total` steps straight; then, from a fresh start, `saved` steps, a checkpoint, a second
-- fresh model loaded from it and the remaining steps: the losses must be equal
local function check_resume(what, fresh, seed_of, saved, total)
  local straight = {}
  local m, opt = fresh()
  for k = 1, total do straight[k] = lm_step(m, opt, seed_of(k)) end
  local a, aopt = fresh()
  for k = 1, saved do lm_step(a, aopt, seed_of(k)) end
  lab.ckpt.save(path, { model = a, optimizer = aopt ~= a and aopt or nil, step = saved })
  local b, bopt = fresh()
  T.eq(lab.ckpt.load(path, { model = b, optimizer = bopt ~= b and bopt or nil }).step, saved)
  for k = saved + 1, total do T.eq(lm_step(b, bopt, seed_of(k)), straight[k], what .. " loss of step " .. k) end
end

T.test("ZeRO 1, 2 and 3: each rank saves its shards and resumes bit for bit", function()
  local zcfg = { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8, tied = false }
  for stage = 1, 3 do
    check_resume("ZeRO-" .. stage, function()
      lab.manual_seed(1)
      local z = lab.zero.wrap(T.place(lab.nn.GPT(zcfg)), { stage = stage, lr = 1e-2 })
      return z, z -- the engine is its own optimizer
    end, function(k) return 2000 + k + 10 * lab.dist.rank() end, 2, 5)
  end
end)

T.test("tensor parallel: each rank saves its own slices and resumes bit for bit", function()
  local tcfg = { vocab = 16, d_model = 16, n_layer = 1, n_head = 4, seq_len = 8, tied = false }
  local grid = lab.dist.grid { tp = lab.dist.world() }
  check_resume("TP", function()
    lab.manual_seed(1)
    local m = T.place(lab.tp.GPT(tcfg, { group = grid.tp_group }))
    return m, lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
  end, function(k) return 3000 + k end, 2, 4) -- the same batch on every rank of the TP group
end)

T.test("a save that fails half-way leaves the previous checkpoint whole", function()
  local m, opt = fresh()
  step(m, opt, 1)
  local saved = m:parameters()[1]:clone()
  lab.ckpt.save(path, { model = m.module, optimizer = opt, step = 1 })
  step(m, opt, 2)
  if r == 0 then lab.ckpt.fail_after = 3 end -- rank 0 dies after writing 3 files
  T.raises(function() lab.ckpt.save(path, { model = m.module, optimizer = opt, step = 2 }) end,
    "ckpt.save", "previous checkpoint", "untouched")
  local b, bopt = fresh()
  local st = lab.ckpt.load(path, { model = b.module, optimizer = bopt })
  T.eq(st.step, 1, "the old checkpoint is still there")
  T.eq(lab.max_abs_diff(b:parameters()[1], saved), 0, "with its parameters")
end)

T.test("a DDP wrapper checkpoints its module; wrong arguments are named", function()
  local a, aopt = fresh()
  step(a, aopt, 1)
  lab.ckpt.save(path, { model = a, optimizer = aopt, step = 1 }) -- the wrapper itself
  local b, bopt = fresh()
  lab.ckpt.load(path, { model = b, optimizer = bopt })
  T.eq(step(b, bopt, 2), step(a, aopt, 2), "the same next step")
  T.raises(function() lab.ckpt.save(nil, {}) end, "ckpt.save", "checkpoint directory")
  T.raises(function() lab.ckpt.load(path, 5) end, "ckpt.load", "table")
  T.raises(function() lab.ckpt.save(path, { model = lab.randn(2) }) end, "ckpt.save", "a tensor")
  -- one rank's tensors missing: every rank raises, naming that rank and its file
  local last = lab.dist.world() - 1
  local step_dir = lab.ckpt.load(path, { model = b, optimizer = bopt }).path
  lab.dist.barrier()
  if r == last then os.remove(string.format("%s/rank%05d.safetensors", step_dir, last)) end
  lab.dist.barrier()
  local c, copt = fresh()
  T.raises(function() lab.ckpt.load(path, { model = c, optimizer = copt }) end, "ckpt.load",
    string.format("rank%05d.safetensors", last), "cannot open", "nothing was changed")
  -- a damaged index: every rank raises
  lab.ckpt.save(path, { model = a, optimizer = aopt, step = 1 })
  step_dir = lab.ckpt.load(path, { model = b, optimizer = bopt }).path
  lab.dist.barrier()
  if r == 0 then
    local f = io.open(step_dir .. "/rank00000.json", "w")
    f:write("return {")
    f:close()
  end
  lab.dist.barrier()
  T.raises(function() lab.ckpt.load(path, { model = c, optimizer = copt }) end, "ckpt.load", "rank00000.json",
    "not valid JSON")
  lab.ckpt.save(path, { model = a, optimizer = aopt, step = 1 }) -- a good one for the next test
end)

T.test("loading into a different model is refused by name and shape", function()
  local other = lab.nn.GPT { vocab = 16, d_model = 8, n_layer = 1, n_head = 2, seq_len = 8 }
  T.raises(function() lab.ckpt.load(path, { model = other }) end, "ckpt.load", "model.wte.weight",
    "has shape [16, 16] in the checkpoint, [16, 8] in the model", "nothing was changed")
  local small = lab.nn.GPT { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8, tied = false }
  T.raises(function() lab.ckpt.load(path, { model = small }) end, "ckpt.load", "model.head.weight", "not in the checkpoint")
  T.raises(function() lab.ckpt.load(dir .. "/nothing", { model = other }) end, "no complete checkpoint")
end)

T.test("restoring the RNG state continues the random stream (dropout and data) bit for bit", function()
  -- nothing reseeds between steps: data and dropout masks come from the one stream, so a resume
  -- that skipped set_rng_state would draw other batches and masks and lose the trajectory
  local function run(m, opt, from, to)
    local losses = {}
    for k = from, to do
      local ids = T.place(lab.randint(0, 16, { 2, 8 }))
      opt:zero_grad()
      local _, loss = m(ids, ids)
      loss:backward()
      opt:step()
      losses[k] = loss:item()
    end
    return losses
  end
  local m, opt = fresh()
  local straight = run(m, opt, 1, 6)
  local a, aopt = fresh()
  run(a, aopt, 1, 3)
  lab.ckpt.save(path, { model = a, optimizer = aopt, step = 3 })
  local b, bopt = fresh()
  lab.manual_seed(12345) -- another stream: only the checkpoint's state gives the right one back
  lab.ckpt.load(path, { model = b, optimizer = bopt })
  local resumed = run(b, bopt, 4, 6)
  for k = 4, 6 do T.eq(resumed[k], straight[k], "loss of step " .. k) end
end)

T.test("values a checkpoint cannot store are refused before anything on disk changes", function()
  local m, opt = fresh()
  step(m, opt, 1)
  lab.ckpt.save(path, { model = m, optimizer = opt, step = 1 })
  local function listing()
    local out = {}
    for _, n in ipairs(lab._ckpt.list_dir(path)) do
      out[#out + 1] = n
      for _, f in ipairs(lab._ckpt.list_dir(path .. "/" .. n) or {}) do out[#out + 1] = n .. "/" .. f end
    end
    return table.concat(out, " ")
  end
  local before = listing()
  T.raises(function() lab.ckpt.save(path, { model = m, optimizer = opt, step = 2, extra = { loss = 0 / 0 } }) end,
    "ckpt.save", "extra.loss", "cannot store faithfully", "nothing was written")
  T.raises(function() lab.ckpt.save(path, { model = m, optimizer = opt, step = 2, extra = { f = print } }) end,
    "ckpt.save", "extra.f is a function")
  T.raises(function() lab.ckpt.save(path, { model = m, optimizer = opt, step = math.huge }) end,
    "ckpt.save", "step must be an integer")
  T.raises(function() lab.ckpt.save(path, { model = m, optimizer = opt, step = 2.5 }) end, "ckpt.save", "2.5")
  T.eq(listing(), before, "the directory is as it was")
  local b, bopt = fresh()
  T.eq(lab.ckpt.load(path, { model = b, optimizer = bopt }).step, 1)
end)

T.test("latest names the newest complete step; older steps are removed after it moved", function()
  local m, opt = fresh()
  lab.ckpt.save(path, { model = m, optimizer = opt, step = 10 })
  lab.ckpt.save(path, { model = m, optimizer = opt, step = 20 })
  lab.ckpt.save(path, { model = m, optimizer = opt, step = 20 }) -- the same step again: a new directory
  lab.dist.barrier()
  local names = lab._ckpt.list_dir(path)
  T.eq(table.concat(names, " "), "latest step_00000020-2")
  T.eq(lab._ckpt.read_file(path .. "/latest"), "step_00000020-2\n")
  local b, bopt = fresh()
  T.eq(lab.ckpt.load(path, { model = b, optimizer = bopt }).step, 20)
  T.eq(lab.ckpt.load(path .. "/step_00000020-2", { model = b, optimizer = bopt }).step, 20, "a step directory itself")
end)

common.remove(dir)
T.finish()
