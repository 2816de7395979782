-- Devices: factories with device=, t:to / :cpu() / .device, the default device, errors that
-- name both devices, lab.cuda without a GPU, Module:to keeping identity, per-device memory
-- accounts, and the sim device (the cpu kernels behind the device table, on memory host code
-- cannot touch) agreeing with the cpu on every op and every gradient of a GPT: exactly where the
-- sim runs the cpu kernels, within 1e-4 where it runs kernels/cuda under the SIMT interpreter
-- (other summation orders and fused kernels, so the last bits differ).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")

local start_device = lab.default_device()
local interpreted = lab.sim and lab.sim.available and os.getenv("LLMLAB_SIMT") ~= "0"
local tol = interpreted and 1e-4 or 0

-- every element equal (within tol where the sim is interpreted), compared on the host in f64
local function same(a, b, what)
  T.eq(a.dtype, b.dtype, what .. " dtype")
  T.eq(table.concat(a.shape, ","), table.concat(b.shape, ","), what .. " shape")
  local d = (a:cpu():to("f64") - b:cpu():to("f64")):abs()
  local worst = d:numel() == 0 and 0 or d:max():item()
  if tol == 0 then T.eq(worst, 0, what .. " values") else T.ok(worst <= tol, what .. " values: " .. worst) end
end

T.test("factories take device= and tensors say where they are", function()
  for _, make in ipairs({
    function(o) return lab.zeros(2, 3, o) end, function(o) return lab.ones(2, 3, o) end,
    function(o) return lab.empty(2, 3, o) end, function(o) return lab.full({ 2, 3 }, 7, o) end,
    function(o) return lab.arange(0, 6, 1, o) end, function(o) return lab.randn(2, 3, o) end,
    function(o) return lab.rand(2, 3, o) end, function(o) return lab.randint(0, 5, { 2, 3 }, o) end,
    function(o) return lab.tensor({ { 1, 2 }, { 3, 4 } }, o) end,
  }) do
    T.eq(make({ device = "sim" }).device, "sim:0")
    T.eq(make({ device = "cpu" }).device, "cpu")
  end
  local s = lab.ones(2, { device = "sim" })
  T.eq(lab.zeros_like(s).device, "sim:0", "_like follows its model")
  T.eq(lab.zeros_like(s, { device = "cpu" }).device, "cpu")
  T.ok(tostring(s):find("device='sim:0'", 1, true), "printing names the device")
  T.ok(not tostring(s:cpu()):find("device", 1, true), "a cpu tensor prints no device")
end)

T.test("the same seed draws the same numbers on every device", function()
  lab.manual_seed(7)
  local a = lab.randn(5, 7, { device = "cpu" })
  lab.manual_seed(7)
  local b = lab.randn(5, 7, { device = "sim" })
  same(a, b, "randn")
  lab.manual_seed(7)
  local c = lab.randint(0, 100, { 9 }, { device = "cpu" })
  lab.manual_seed(7)
  same(c, lab.randint(0, 100, { 9 }, { device = "sim" }), "randint")
end)

T.test("to, cpu, item, tolist and indexing go through the device", function()
  local h = lab.tensor({ { 1.5, -2 }, { 3, 4.25 } })
  local s = h:to("sim")
  T.eq(s.device, "sim:0")
  same(s:cpu(), h:cpu(), "round trip")
  T.eq(s[2][2], 4.25)
  T.eq(s:sum():item(), 6.75)
  T.eq(s:tolist()[1][2], -2)
  T.eq(s:t():contiguous()[1][2], 3, "a transposed view made contiguous on the device")
  local b = s:to("sim", "bf16")
  T.eq(b.dtype, "bf16")
  T.eq(b.device, "sim:0")
  same(s:to(h), h:to(h), "to(other) takes its device and dtype")
  s[1] = lab.tensor({ 9, 8 })
  T.eq(s[1][1], 9, "assigning a cpu row into a sim tensor")
  local i = lab.tensor({ 4, 5 }, { device = "sim" })
  i[2] = 11
  T.eq(i[2], 11)
  T.eq(lab.is_tensor(s:cpu()), true)
end)

T.test("ops on two devices are errors naming both", function()
  local c, s = lab.ones(3, { device = "cpu" }), lab.ones(3, { device = "sim" })
  T.raises(function() return c + s end, "add", "cpu", "sim:0", "rank")
  T.raises(function() return s:matmul(lab.ones(3, 2, { device = "cpu" })) end, "matmul", "sim:0", "cpu")
  T.raises(function() return lab.cat({ s, c }) end, "cat", "sim:0", "cpu")
  T.raises(function() s:add_(c) end, "add", "sim:0", "cpu")
  -- a cpu scalar goes with any device, as in PyTorch
  same((s * lab.tensor(2.0)):cpu(), lab.full({ 3 }, 2.0), "cpu scalar with a sim tensor")
  same((s + 1):cpu(), lab.full({ 3 }, 2.0), "a Lua number with a sim tensor")
  -- copy_ moves across devices
  local d = lab.zeros(3, { device = "sim" })
  d:copy_(lab.tensor({ 1, 2, 3 }, { dtype = "f32", device = "cpu" }))
  T.values(d, { 1, 2, 3 })
end)

T.test("cuda without a GPU says so; unknown devices are named", function()
  if lab.cuda.is_available() then return end -- tests/gpu covers machines with one
  T.eq(lab.cuda.device_count(), 0)
  lab.cuda.synchronize() -- nothing queued: a no-op, not an error
  local err = T.raises(function() return lab.zeros(2, { device = "cuda" }) end, "cuda", "rank")
  T.ok(err:find("without CUDA", 1, true) or err:find("no CUDA device", 1, true)
    or err:find("CUDA not compiled in", 1, true) or err:find("not usable", 1, true), err)
  T.raises(function() return lab.ones(2):to("tpu") end, "unknown dtype or device", "tpu")
  T.raises(function() lab.set_default_device("cuda:99") end, "cuda")
  T.raises(function() return lab.ones(2, { device = "cpu:1" }) end, "cpu")
  T.ok(lab.cuda.status():find("CUDA", 1, true), "lab.cuda.status() explains")
end)

T.test("the default device places factories; gradients flow across :to", function()
  lab.set_default_device("sim")
  T.eq(lab.default_device(), "sim:0")
  T.eq(lab.randn(2).device, "sim:0")
  lab.set_default_device(start_device)
  local x = lab.randn(3, 4, { dtype = "f64" }):cpu():requires_grad_()
  local y = (x:to("sim") * 3):sum()
  y:backward()
  T.eq(x.grad.device, "cpu", "the gradient comes back to the leaf's device")
  T.values(x.grad, { { 3, 3, 3, 3 }, { 3, 3, 3, 3 }, { 3, 3, 3, 3 } })
end)

T.test("memory is accounted per device and tag", function()
  collectgarbage()
  local before = lab.mem.stats("sim").current
  local cpu_before = lab.mem.stats("cpu").current
  local t = lab.zeros(256, 256, { device = "sim" })
  lab.mem.tag(t, "param")
  local s = lab.mem.stats("sim")
  T.eq(s.device, "sim:0")
  T.eq(s.current - before, 256 * 256 * 4, "sim bytes")
  T.ok(s.tags.param.current >= 256 * 256 * 4, "tagged param on sim")
  T.ok(lab.mem.stats("cpu").current - cpu_before < 256 * 256 * 4, "not counted on the cpu")
  t:close()
  T.eq(lab.mem.stats("sim").current, before, "freed")
end)

-- A GPT trained a few steps on the cpu and on sim: same kernels, so every loss, gradient
-- and parameter must be bitwise equal; Module:to keeps the parameters the optimizer holds.
T.test("a GPT trains identically on cpu and sim (Module:to keeps identity)", function()
  local cfg = { vocab = 32, d_model = 32, n_layer = 2, n_head = 4, seq_len = 16 }
  local function run(device)
    lab.manual_seed(3)
    local m = lab.nn.GPT(cfg)
    local before = m:parameters()
    m:to(device)
    local after = m:parameters()
    for i = 1, #before do T.ok(rawequal(before[i], after[i]), "parameter " .. i .. " kept") end
    for _, p in ipairs(after) do T.eq(p.device, device == "cpu" and "cpu" or "sim:0") end
    local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
    local losses, grads = {}, {}
    for k = 1, 3 do
      lab.manual_seed(10 + k)
      local ids = lab.randint(0, cfg.vocab, { 2, 16 }, { device = device })
      opt:zero_grad()
      local _, loss = m(ids, ids)
      loss:backward()
      losses[k] = loss:item()
      opt:step()
    end
    for i, p in ipairs(m:parameters()) do grads[i] = p.grad end
    return losses, m:parameters(), grads
  end
  local lc, pc, gc = run("cpu")
  local ls, ps, gs = run("sim")
  for k = 1, #lc do T.ok(math.abs(ls[k] - lc[k]) <= tol, "loss " .. k .. ": " .. ls[k] .. " vs " .. lc[k]) end
  T.eq(#ps, #pc)
  for i = 1, #pc do
    same(ps[i], pc[i], "parameter " .. i)
    same(gs[i], gc[i], "gradient " .. i)
  end
end)

T.test("async send/recv and collectives of sim tensors complete when waited for", function()
  local n, r = lab.dist.world_size(), lab.dist.rank()
  local big = 1 << 20 -- 4 MiB: beyond MPI's eager limit, so a blocking send would wait for its peer
  local x = lab.full({ big }, r + 1, { device = "sim", dtype = "f32" })
  if n > 1 then
    -- every rank sends before any rank waits (the pipeline schedules do this)
    local y = lab.zeros(big, { device = "sim" })
    local hs = lab.dist.isend(x, (r + 1) % n)
    local hr = lab.dist.irecv(y, (r - 1) % n)
    hs:wait()
    hr:wait()
    T.eq(y.device, "sim:0")
    T.eq(y:sum():item(), big * ((r - 1) % n + 1), "received the previous rank's values")
  end
  local z = lab.full({ 8 }, r + 1, { device = "sim", dtype = "f32" })
  local h = lab.dist.all_reduce(z, { async = true })
  h:wait()
  T.eq(z:sum():item(), 8 * n * (n + 1) / 2, "async all_reduce wrote back into the sim tensor")
end)

T.finish()
