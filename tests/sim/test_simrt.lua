-- The sim device running runtime/cuda's own device code (cuda_device.c compiled against the
-- emulated CUDA runtime of runtime/simrt): two devices, copies between them, matrix products
-- through the cuBLASLt call's arguments (the reference GEMM in runtime/simrt/gemm.c) in every
-- layout the runtime passes (transposed views, batches, broadcast batches, k = 0) and every
-- float dtype, and a GPT training step equal to the cpu's, every parameter compared.
-- Run: build/llmlab --device sim tests/sim/test_simrt.lua (ctest: sim.test_simrt)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
lab.manual_seed(7)

local function max_diff(a, b) return (a:to("cpu"):to("f64") - b:to("cpu"):to("f64")):abs():max():item() end

T.test("two devices: sim:0 and sim:1, copies between them and ops on each = cpu", function()
  local x = lab.randn(5, 7)
  local a, b = x:to("sim:0"), x:to("sim:1")
  T.eq(b.device, "sim:1", "device of b")
  local y = (a * 2 + 1):to("sim:1") -- a copy across the two devices
  T.ok(max_diff(y, x * 2 + 1) == 0, "sim:0 -> sim:1")
  T.ok(max_diff((b:exp() + y):to("sim:0"), x:exp() + (x * 2 + 1)) < 1e-6, "ops on sim:1, back to sim:0")
end)

T.test("matmul through the cuBLASLt arguments: layouts, transposes, batches, dtypes = cpu", function()
  local tol = { f32 = 1e-5, f64 = 1e-12, bf16 = 3e-2, f16 = 3e-3 }
  for _, dt in ipairs({ "f32", "f64", "bf16", "f16" }) do
    local cases = {
      { lab.randn(5, 3), lab.randn(3, 4) },
      { lab.randn(3, 5):t(), lab.randn(3, 4) },                 -- A transposed
      { lab.randn(5, 3), lab.randn(4, 3):t() },                 -- B transposed
      { lab.randn(3, 5):t(), lab.randn(4, 3):t() },             -- both
      { lab.randn(2, 3, 5, 6), lab.randn(2, 3, 6, 4) },         -- batches
      { lab.randn(2, 3, 5, 6), lab.randn(6, 4) },               -- B broadcast over the batch
      { lab.randn(3, 6, 5):transpose(2, 3), lab.randn(3, 6, 4) }, -- batched, A transposed
      { lab.randn(4, 0), lab.randn(0, 3) },                     -- k = 0: zeros
    }
    for i, c in ipairs(cases) do
      local a, b = c[1]:to(dt), c[2]:to(dt)
      local want = lab.matmul(a, b)
      local got = lab.matmul(a:to("sim"), b:to("sim"))
      T.eq(table.concat(got.shape, "x"), table.concat(want.shape, "x"), dt .. " case " .. i .. " shape")
      local d = max_diff(got, want)
      T.ok(d <= tol[dt] * math.max(1, want:to("f64"):abs():max():item()),
           string.format("%s case %d: |sim - cpu| = %g", dt, i, d))
    end
  end
end)

T.test("a GPT training step on sim = cpu: loss and every parameter", function()
  local cfg = { vocab = 32, d_model = 32, n_layer = 1, n_head = 2, seq_len = 8 }
  local function run(dev)
    lab.manual_seed(3)
    local m = lab.nn.GPT(cfg):to(dev)
    local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
    local losses = {}
    for k = 1, 2 do
      lab.manual_seed(10 + k)
      local ids = lab.randint(0, cfg.vocab, { 2, 8 }):to(dev)
      opt:zero_grad()
      local _, loss = m(ids, ids)
      loss:backward()
      opt:step()
      losses[k] = loss:item()
    end
    return losses, m:parameters()
  end
  local lc, pc = run("cpu")
  local ls, ps = run("sim")
  for k = 1, #lc do T.near(ls[k], lc[k], 1e-4, "loss " .. k) end
  T.eq(#ps, #pc, "parameter count")
  for i = 1, #pc do T.ok(max_diff(ps[i], pc[i]) < 1e-4, "parameter " .. i) end
end)

T.finish()
