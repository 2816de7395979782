-- The kernels of kernels/cuda that the sim lane's other interpreted tests do not launch, each
-- run by the SIMT interpreter on the sim device against the cpu kernels on the same inputs:
-- attention's math path in f32 (the causal mask and the softmax backward), AdamW in f32.
-- Run: build/llmlab --device sim tests/sim/test_kernels.lua (ctest: sim.test_kernels)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
lab.manual_seed(5)

local function max_diff(a, b) return (a:to("cpu"):to("f64") - b:to("cpu"):to("f64")):abs():max():item() end

T.test("sdpa impl='math' in f32, causal and not, T != S: outputs and gradients = cpu", function()
  for _, causal in ipairs({ true, false }) do
    local q0, k0, v0 = lab.randn(2, 3, 5, 8), lab.randn(2, 3, 7, 8), lab.randn(2, 3, 7, 8)
    local g = lab.randn(2, 3, 5, 8)
    local res = {}
    for _, dev in ipairs({ "cpu", "sim" }) do
      local q, k, v = q0:to(dev):requires_grad_(), k0:to(dev):requires_grad_(), v0:to(dev):requires_grad_()
      local out = lab.sdpa(q, k, v, { causal = causal, impl = "math" })
      ;(out * g:to(dev)):sum():backward()
      res[dev] = { out, q.grad, k.grad, v.grad }
    end
    for i, name in ipairs({ "out", "dq", "dk", "dv" }) do
      T.ok(max_diff(res.sim[i], res.cpu[i]) < 1e-5, string.format("causal=%s %s", tostring(causal), name))
    end
  end
end)

T.test("AdamW in f32: three steps = cpu", function()
  local p0, g0 = lab.randn(300), lab.randn(300)
  local got = {}
  for _, dev in ipairs({ "cpu", "sim" }) do
    local p = p0:to(dev):requires_grad_()
    local opt = lab.optim.AdamW({ p }, { lr = 1e-2, weight_decay = 0.1 })
    for _ = 1, 3 do
      p.grad = g0:to(dev)
      opt:step()
    end
    got[dev] = p
  end
  T.ok(max_diff(got.sim, got.cpu) < 1e-6, "parameters after three steps")
end)

T.finish()
