-- Issue 23, defect 4's scalar half: a Lua number in an op on a device (x * 2, fill_, the sdpa
-- scale, backward's seed, cross_entropy's mean) goes to the kernel as an argument
-- (lab_ew_args.scalars), not as a cpu 0-d tensor copied to the device before every op (a
-- host-to-device copy, which synchronizes a real GPU's stream). Counted on the sim by
-- lab.cuda.sim_uploads(), its host-to-device copies; every value = the cpu's, bitwise.
-- Run: build/llmlab --device sim tests/sim/test_scalar_args.lua (ctest: sim.test_scalar_args)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")

local function uploads() return lab.cuda.sim_uploads() end

-- every element equal (NaN = NaN), read back as f64 on the cpu
local function bitwise(a, b)
  if a.dtype ~= b.dtype then return false, "dtype " .. a.dtype .. " vs " .. b.dtype end
  local x = a:to("cpu"):to("f64"):flatten():tolist()
  local y = b:to("cpu"):to("f64"):flatten():tolist()
  local n = 0
  for i = 1, #y do
    if x[i] == y[i] or (x[i] ~= x[i] and y[i] ~= y[i]) then n = n + 1 end
  end
  return n == #y and #x == #y, string.format("%d of %d equal", n, #y)
end

local ops = {
  { "x * 2", function(x) return x * 2 end },
  { "x + 1.5", function(x) return x + 1.5 end },
  { "2 - x", function(x) return 2 - x end },
  { "x / 3", function(x) return x / 3 end },
  { "x ^ 2", function(x) return x ^ 2 end },
  { "x:pow(0.5)", function(x) return x:abs():pow(0.5) end },
  { "x:gt(0.1)", function(x) return x:gt(0.1) end },
  { "x:maximum(0)", function(x) return x:maximum(0) end },
  { "where(x > 0, x, 0.25)", function(x) return lab.where(x:gt(0), x, 0.25) end },
  { "x * 1e-3 + 7 (chain)", function(x) return x * 1e-3 + 7 end },
  { "x:mul_(3)", function(x) local y = x:clone(); y:mul_(3); return y end },
  { "fill_(2.7)", function(x) local y = x:clone(); y:fill_(2.7); return y end },
  { "full_like", function(x) return lab.full(x.shape, 1 / 3, { dtype = x.dtype, device = x.device }) end },
}

T.test("ops with a Lua number on sim make no host-to-device copy, values = cpu bitwise (f32, f64, bf16, f16, i64, i32)", function()
  lab.manual_seed(5)
  for _, dt in ipairs({ "f32", "f64", "bf16", "f16", "i64", "i32" }) do
    local x0 = (lab.randn(7, 33, { device = "cpu" }) * 4):to(dt)
    local x = x0:to("sim")
    for _, op in ipairs(ops) do
      local ok, want = pcall(op[2], x0)
      if ok then -- the ops an integer tensor takes
        local u0 = uploads()
        local got = op[2](x)
        T.eq(uploads() - u0, 0, dt .. " " .. op[1] .. ": host-to-device copies")
        T.eq(got.device, "sim:0", dt .. " " .. op[1] .. ": on the sim")
        local same, why = bitwise(got, want)
        T.ok(same, dt .. " " .. op[1] .. " = cpu: " .. why)
      end
    end
  end
end)

T.test("the math sdpa path (its scale), and its backward, make no host-to-device copy", function()
  lab.manual_seed(6)
  local q0 = lab.randn(2, 2, 5, 4, { device = "cpu" }):requires_grad_()
  local q = q0:detach():to("sim"):requires_grad_()
  local u0 = uploads()
  local o = lab.sdpa(q, q, q, { causal = true, impl = "math" })
  o:sum():backward()
  T.eq(uploads() - u0, 0, "sdpa forward and backward")
  local o0 = lab.sdpa(q0, q0, q0, { causal = true, impl = "math" })
  o0:sum():backward()
  T.ok((o:to("cpu") - o0):abs():max():item() < 1e-6, "out = cpu")
  T.ok((q.grad:to("cpu") - q0.grad):abs():max():item() < 1e-5, "dq = cpu")
end)

T.test("a GPT step with clipping on sim uploads only the positions (arange), = cpu", function()
  local cfg = { vocab = 32, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8 }
  local res = {}
  for _, dev in ipairs({ "cpu", "sim" }) do
    lab.manual_seed(1)
    local m = lab.nn.GPT(cfg)
    m:to(dev)
    local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
    local ids = lab.randint(0, cfg.vocab, { 2, cfg.seq_len }, { device = "cpu" }):to(dev)
    local tg = lab.randint(0, cfg.vocab, { 2, cfg.seq_len }, { device = "cpu" }):to(dev)
    local losses, n = {}, 0
    for k = 1, 2 do
      local u0 = uploads()
      opt:zero_grad()
      local _, loss = m(ids, tg)
      loss:backward()
      lab.optim.clip_grad_norm(m:parameters(), 0.05)
      opt:step()
      losses[k] = loss:item()
      n = uploads() - u0
    end
    res[dev] = { losses = losses, uploads = n }
  end
  T.eq(res.sim.uploads, 1, "host-to-device copies in a step (the positions)")
  for k = 1, 2 do T.near(res.sim.losses[k], res.cpu.losses[k], 1e-5, "loss " .. k .. " = cpu") end
end)

T.finish()
