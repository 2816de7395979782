-- A race-free kernel gives the same bits whatever order its threads run in. The interpreter
-- shuffles thread order between barriers from LLMLAB_SIMT_SEED and spreads blocks over
-- LLMLAB_SIMT_THREADS OS threads; CI otherwise runs one order only. This runs the same kernels
-- (FlashAttention forward and backward, bf16, causal, a tail tile; a multi-block sum; softmax;
-- layer_norm with its weight gradients, split over blocks and combined in a fixed order) in child
-- processes under seeds 1 and 7, natural order (0) and seed 7 on 2 threads, and compares every
-- result bit for bit. The flash backward runs with lab.use_deterministic_algorithms(true): its
-- default dq sums by atomics, whose order is not fixed on a GPU either. The racy kernel planted
-- in tests/unit/test_simt.c shows the other side (its result changes with the seed).
--   build/llmlab tests/sim/test_thread_order.lua build/llmlab     (ctest: sim.test_thread_order)
--   build/llmlab --device sim tests/sim/test_thread_order.lua write OUT_PREFIX   (one child)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path

local function results()
  lab.manual_seed(31)
  lab.use_deterministic_algorithms(true)
  local q = lab.randn(1, 2, 70, 64):to("bf16"):to("sim"):requires_grad_()
  local k = lab.randn(1, 2, 70, 64):to("bf16"):to("sim"):requires_grad_()
  local v = lab.randn(1, 2, 70, 64):to("bf16"):to("sim"):requires_grad_()
  local o = lab.sdpa(q, k, v, { causal = true })
  o:sum():backward()
  local x = lab.randn(3000, 24):to("sim"):requires_grad_()
  local w = lab.randn(24):to("sim"):requires_grad_()
  local b = lab.randn(24):to("sim"):requires_grad_()
  local y = lab.layer_norm(x, w, b)
  local sq = (y * y):sum()
  sq:backward()
  local long = lab.randn(50000):to("sim")
  return { o, q.grad, k.grad, v.grad, long:sum(), x:softmax(2), y, x.grad, w.grad, b.grad }
end

if arg[1] == "write" then
  for i, t in ipairs(results()) do t:detach():to("cpu"):save_npy(arg[2] .. i .. ".npy") end
  os.exit(0)
end

local T = require("harness")
local exe = assert(arg[1], "usage: test_thread_order.lua LLMLAB_BINARY")
local dir = os.tmpname()
os.remove(dir)
local runs = {
  { "seed 1", "LLMLAB_SIMT_SEED=1" },
  { "seed 7", "LLMLAB_SIMT_SEED=7" },
  { "natural order", "LLMLAB_SIMT_SEED=0" },
  { "seed 7, 2 threads", "LLMLAB_SIMT_SEED=7 LLMLAB_SIMT_THREADS=2" },
}
T.test("the same bits under every thread order and worker count", function()
  for i, r in ipairs(runs) do
    local cmd = string.format("env %s %q --device sim %q write %q", r[2], exe, arg[0],
      dir .. "-" .. i .. "-")
    T.ok(os.execute(cmd), r[1] .. ": the child ran (" .. cmd .. ")")
  end
  for j = 1, 10 do
    local ref = lab.load_npy(dir .. "-1-" .. j .. ".npy"):to("f64")
    T.ok(ref:numel() > 0, "result " .. j .. " written")
    for i = 2, #runs do
      local got = lab.load_npy(dir .. "-" .. i .. "-" .. j .. ".npy"):to("f64")
      T.eq(table.concat(got.shape, "x"), table.concat(ref.shape, "x"), runs[i][1] .. " result " .. j .. " shape")
      local d = lab.max_abs_diff(got, ref)
      T.ok(d == 0, string.format("%s result %d: max |diff| against seed 1 = %g", runs[i][1], j, d))
    end
  end
  for i = 1, #runs do
    for j = 1, 10 do os.remove(dir .. "-" .. i .. "-" .. j .. ".npy") end
  end
end)

T.finish()
