-- Issue 23's kernel defects, shown on the sim device, where kernels/cuda runs under the SIMT
-- interpreter: each case compares the interpreted CUDA kernel against the cpu kernel on the
-- same inputs (and memcheck fails any read past an allocation).
-- Run: build/llmlab --device sim tests/sim/test_cuda_fixes.lua (ctest: sim.test_cuda_fixes)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
lab.manual_seed(7)

local function same(a, b) return (a:to("cpu"):to("f64") - b:to("cpu"):to("f64")):abs():max():item() end

-- nn.cu copied embedding rows as 16-bit words for every dtype but f32/f64: an FP8 row was read
-- at twice its width (memcheck: past the end of the weight) and an i32 row at half its width
T.test("embedding rows of every dtype are copied whole (fp8, i32, i64, bf16, bool)", function()
  local ids = lab.tensor({ 3, 0, 2, 2, 1 }):to("cpu"):to("i64")
  for _, dt in ipairs({ "f8e4m3", "f8e5m2", "i32", "i64", "bf16", "bool" }) do
    local w = (lab.randn(4, 6) * 3):to("cpu"):to(dt)
    local want = lab.embedding(ids, w)
    local got = lab.embedding(ids:to("sim"), w:to("sim"))
    T.eq(want.device, "cpu", "reference on the cpu")
    T.eq(got.device, "sim:0", "under test on the sim")
    T.ok(same(got:to("f64"), want:to("f64")) == 0, dt .. ": rows equal the cpu's")
  end
end)

-- random.cu took hi - lo in signed arithmetic: ranges wider than 2^63 overflow int64
T.test("randint over ranges wider than 2^63 = cpu (same seed)", function()
  for _, r in ipairs({ { -1, math.maxinteger }, { math.mininteger, math.maxinteger }, { -5, 7 } }) do
    lab.manual_seed(11)
    local want = lab.randint(r[1], r[2], { 257 }, { device = "cpu" })
    lab.manual_seed(11)
    local got = lab.randint(r[1], r[2], { 257 }, { device = "sim" })
    T.ok((got:to("cpu") - want):to("f64"):abs():max():item() == 0, string.format("randint(%d, %d)", r[1], r[2]))
  end
end)

-- reduce.cu ran one block per output: a full sum or a gradient norm on one SM, and sum_middle
-- (bias gradients) one thread per column over every row. Now split over many blocks: the
-- values still equal the cpu's, and the launches are counted in a child's coverage table.
T.test("sums and norms of long lines, long middle sums: values = cpu (f32, f64, i64)", function()
  for _, dt in ipairs({ "f32", "f64" }) do
    local x0 = lab.randn(50000):to("cpu"):to(dt)
    local x = x0:to("sim")
    local tol = dt == "f32" and 1e-3 or 1e-9
    T.near(x:sum():item(), x0:sum():item(), tol, dt .. " sum")
    T.near(x:mean():item(), x0:mean():item(), tol, dt .. " mean")
    for _, p in ipairs({ 2, 1, 3, math.huge }) do
      T.near(x:norm(p):item(), x0:norm(p):item(), tol, dt .. " norm " .. p)
    end
    local y0 = lab.randn(3000, 7):to("cpu"):to(dt) -- a bias gradient's shape: few columns, many rows
    T.ok(same(y0:to("sim"):sum(1), y0:sum(1)) < tol, dt .. " column sums")
  end
  local n0 = lab.randint(-1000, 1000, { 40000 }, { device = "cpu" })
  T.eq(n0:to("sim"):sum():item(), n0:sum():item(), "i64 sum exact")
end)

-- nn.cu's norm weight gradients ran one thread per column over every row (3 blocks for a
-- [8192, 768] gradient): now row chunks over many blocks, added in a fixed order
T.test("layer_norm and rms_norm weight and bias gradients over 2048 rows = cpu (f32, f64)", function()
  for _, dt in ipairs({ "f32", "f64" }) do
    local x0, g0 = lab.randn(2048, 24):to("cpu"):to(dt), lab.randn(2048, 24):to("cpu"):to(dt)
    local w0, b0 = lab.randn(24):to("cpu"):to(dt), lab.randn(24):to("cpu"):to(dt)
    local res = {}
    for _, dev in ipairs({ "cpu", "sim" }) do
      local function leaf(t) return t:to(dev):clone():detach():requires_grad_() end
      local x, w, b, w2 = leaf(x0), leaf(w0), leaf(b0), leaf(w0)
      ;(lab.layer_norm(x, w, b) * g0:to(dev)):sum():backward()
      ;(lab.rms_norm(x, w2) * g0:to(dev)):sum():backward()
      res[dev] = { w.grad, b.grad, w2.grad, x.grad }
    end
    local tol = dt == "f32" and 1e-3 or 1e-9
    for i, name in ipairs({ "layer_norm dw", "layer_norm db", "rms_norm dw", "dx (both)" }) do
      T.ok(same(res.sim[i], res.cpu[i]) < tol, dt .. " " .. name)
    end
  end
end)

T.test("a full sum, a 4096-row column sum and a norm weight gradient run on many blocks (coverage of a child run)", function()
  local cov, first = os.tmpname(), -1
  while arg[first - 1] do first = first - 1 end -- the llmlab binary, before its options
  local code = "lab.randn(100000):sum():item(); lab.randn(4096, 8):sum(1):sum():item(); "
    .. "local x, w = lab.randn(4096, 8):requires_grad_(), lab.randn(8):requires_grad_(); "
    .. "lab.rms_norm(x, w):sum():backward(); w.grad:sum():item()"
  local cmd = string.format("LLMLAB_SIMT_COVERAGE=%s %s --device sim -e %q >/dev/null 2>&1", cov, arg[first], code)
  T.ok(os.execute(cmd), "child run")
  local blocks = {}
  for line in io.lines(cov) do
    local k, b = line:match("simt coverage: (%S+) %-> %d+ launches, (%d+) blocks")
    if k then blocks[k] = tonumber(b) end
  end
  os.remove(cov)
  T.ok((blocks["reduce_partial_kernel"] or 0) >= 64, "full sum: " .. tostring(blocks["reduce_partial_kernel"]) .. " blocks")
  T.ok((blocks["sum_middle_partial_kernel<float>"] or 0) >= 8,
       "column sum: " .. tostring(blocks["sum_middle_partial_kernel<float>"]) .. " blocks (8 columns: 1 before)")
  T.ok((blocks["norm_bwd_params_partial_k<float>"] or 0) >= 8,
       "rms_norm dw: " .. tostring(blocks["norm_bwd_params_partial_k<float>"]) .. " blocks (8 columns: 1 before)")
end)

-- how a GPU step's stalls are counted without a GPU: the sim counts where the cuda device would
-- wait for its stream (device-to-host copies, synchronize, cross-entropy's row count)
T.test("lab.cuda.sim_host_syncs counts read-backs, not launches or uploads", function()
  local x = lab.randn(1000)
  local s0 = lab.cuda.sim_host_syncs()
  local y = (x * 2 + 1):exp():sum()
  local z = lab.tensor({ 1, 2, 3 })
  T.eq(lab.cuda.sim_host_syncs() - s0, 0, "kernels and a host-to-device copy")
  y:item()
  T.eq(lab.cuda.sim_host_syncs() - s0, 1, "one :item()")
  z:to("cpu")
  T.eq(lab.cuda.sim_host_syncs() - s0, 2, "one copy to the cpu")
end)

T.finish()
