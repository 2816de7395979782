-- The sim's two devices after each other, through the normal tensor API, every value against
-- the cpu: each op runs on the stream of the device that holds its tensors, whichever device
-- was used last (issue 23 defect 1). runtime/simrt refuses a kernel launched on one device's
-- stream with another device's pointer, naming the launcher and the pointer, so a device table
-- that launched on the current device's stream fails here at the first in-place op on one
-- device after an op on the other. And copy_ between overlapping ranges of one tensor (device.h: regions may overlap),
-- which CUDA's device-to-device cudaMemcpyAsync forbids and the sim refuses (defect 3).
-- Run: build/llmlab --device sim tests/sim/test_two_devices.lua (ctest: sim.test_two_devices)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
local same = dofile((arg[0]:match("(.*/)") or "./") .. "sim_same.lua")
lab.manual_seed(23)

-- elementwise, reductions, fused norms and softmax, a matmul, cross-entropy with its backward,
-- and a bf16 FlashAttention forward: every launcher kind once
local function ops(x, w, ids, q)
  local xr = x:detach():requires_grad_()
  local y = lab.layer_norm(xr * 2 + 1, w, nil):softmax(-1)
  local z = y:matmul(w:view(1, 64):t():expand(64, 3):contiguous())
  local loss = lab.cross_entropy(lab.rms_norm(xr, w), ids)
  loss:backward()
  local o = lab.sdpa(q, q, q, { causal = true })
  return { y, y:sum(2), z, loss, xr.grad, o }
end

T.test("ops on sim:0, then sim:1, then sim:0 again: each on its own device, every value = cpu", function()
  local x, w = lab.randn(5, 64, { device = "cpu" }), lab.randn(64, { device = "cpu" })
  local ids = lab.randint(0, 64, { 5 }, { device = "cpu" })
  local q = lab.randn(1, 2, 17, 64, { device = "cpu" }):to("bf16")
  local want = ops(x, w, ids, q)
  for _, dev in ipairs({ "sim:0", "sim:1", "sim:0", "sim:1" }) do
    local got = ops(x:to(dev), w:to(dev), ids:to(dev), q:to(dev))
    for i = 1, #want do
      T.eq(got[i].device, dev, dev .. " result " .. i .. " stays on its device")
      local tol = got[i].dtype == "bf16" and 2e-2 or 1e-4
      same(got[i], want[i], dev .. " result " .. i, tol)
    end
  end
end)

-- In-place ops allocate nothing, so nothing else makes their device current: each one below
-- follows an op on the other device (the case defect 1 launched on the wrong GPU)
T.test("in-place ops alternating between sim:0 and sim:1 = cpu", function()
  local base = lab.randn(3, 40, { device = "cpu" })
  local c, d0, d1 = base:clone(), base:to("sim:0"), base:to("sim:1")
  local steps = {
    function(t) return t:mul_(2) end,
    function(t) return t:add_(1) end,
    function(t) return t:tanh_() end,
    function(t) return t:narrow(2, 1, 20):copy_(t:narrow(2, 21, 20)) end,
    function(t) return t:fill_(0.5) end,
  }
  for i, f in ipairs(steps) do
    f(c)
    f(d0)
    f(d1)
    same(d0, c, "step " .. i .. " on sim:0", 1e-6)
    same(d1, c, "step " .. i .. " on sim:1", 1e-6)
  end
end)

T.test("copy_ between overlapping ranges of one tensor = cpu (sim:0 and sim:1)", function()
  local base = lab.arange(1000, { device = "cpu" }):to("f32")
  for _, dev in ipairs({ "cpu", "sim:0", "sim:1" }) do
    local a, b = base:clone():to(dev), base:clone():to(dev)
    a:narrow(1, 2, 999):copy_(a:narrow(1, 1, 999)) -- forward by one element
    b:narrow(1, 1, 990):copy_(b:narrow(1, 11, 990)) -- backward by ten
    local wa = lab.cat({ base:narrow(1, 1, 1), base:narrow(1, 1, 999) })
    local wb = lab.cat({ base:narrow(1, 11, 990), base:narrow(1, 991, 10) })
    same(a, wa, dev .. " forward overlap", 0)
    same(b, wb, dev .. " backward overlap", 0)
  end
end)

T.finish()
