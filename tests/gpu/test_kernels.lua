-- Every CUDA kernel against its cpu twin on awkward shapes (sizes not multiples of 32,
-- transposed and broadcast views, empty tensors), per-dtype tolerances; cuBLASLt against
-- OpenBLAS; the same seed drawing the same numbers on both devices; the allocator's reuse.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local G = require("gpu_common")
G.require_gpu()
local T = require("harness")

local function close(gpu, cpu, what, tol)
  T.eq(gpu.device:sub(1, #G.dev), G.dev, what .. " ran on the device")
  T.eq(gpu.dtype, cpu.dtype, what .. " dtype")
  T.eq(table.concat(gpu.shape, ","), table.concat(cpu.shape, ","), what .. " shape")
  local e = G.rel_err(gpu, cpu)
  T.ok(e <= (tol or G.tol[cpu.dtype] or 1e-5), string.format("%s: relative error %.3g", what, e))
end

-- runs f on cpu inputs and on their cuda copies; compares every output
local function twin(what, f, inputs, tol)
  local g = {}
  for i, x in ipairs(inputs) do g[i] = x:to(G.dev) end
  local rc, rg = f(table.unpack(inputs)), f(table.unpack(g))
  close(rg, rc, what, tol)
end

lab.manual_seed(5)
for _, dt in ipairs({ "f32", "f64", "bf16", "f16" }) do
  T.test("elementwise, broadcast and strided " .. dt, function()
    local a, b = lab.randn(37, 45):to(dt), lab.randn(45):to(dt)
    for _, op in ipairs({ "add", "sub", "mul", "div", "maximum", "minimum" }) do
      twin(op, function(x, y) return x[op](x, y) end, { a, b })
    end
    twin("transposed + broadcast", function(x, y) return x:t() + y:view(45, 1) end, { a, b })
    for _, op in ipairs({ "exp", "tanh", "sigmoid", "abs", "neg" }) do twin(op, function(x) return x[op](x) end, { a }) end
    twin("empty", function(x) return x:narrow(1, 1, 0) * 2 end, { a })
  end)
  T.test("reductions and softmax " .. dt, function()
    local a = lab.randn(33, 129):to(dt)
    twin("sum all", function(x) return x:sum() end, { a }, 1e-2)
    twin("sum dim 1", function(x) return x:sum(1) end, { a }, 1e-2)
    twin("mean dim 2", function(x) return x:mean(2) end, { a }, 1e-2)
    twin("max dim 2", function(x) return (x:max(2)) end, { a })
    twin("softmax", function(x) return x:softmax(2) end, { a })
    twin("log_softmax", function(x) return x:log_softmax(2) end, { a })
  end)
end

T.test("norms, activations, embedding, cross-entropy, forward and backward (f32)", function()
  local function grads(dev)
    lab.manual_seed(9)
    local x = lab.randn(7, 67):to(dev):requires_grad_()
    local w = lab.randn(67):to(dev):requires_grad_()
    local b = lab.randn(67):to(dev):requires_grad_()
    local e = lab.randn(50, 67):to(dev):requires_grad_()
    local ids = lab.randint(0, 50, { 7 }):to(dev)
    local y = lab.layer_norm(x, w, b):gelu() + lab.rms_norm(x, w):silu() + lab.embedding(ids, e)
    local loss = lab.cross_entropy(y, lab.randint(0, 67, { 7 }):to(dev))
    loss:backward()
    return { loss, x.grad, w.grad, b.grad, e.grad }
  end
  local c, g = grads("cpu"), grads(G.dev)
  for i = 1, #c do close(g[i], c[i], "output " .. i, 1e-4) end
end)

T.test("FP8 casts on the device equal the cpu's bit for bit (cvt.rn.satfinite vs kernels/cpu/fp8.c)", function()
  -- ordinary values over both formats' ranges, and each class: zero, subnormal edges and
  -- ties, max, the tie above max, overflow, infinities, NaN
  local specials = { 0, -0.0, 2 ^ -9, 2 ^ -10, 1.5 * 2 ^ -10, 2 ^ -16, 2 ^ -17, 1.0625, 1.1875, 448, 464, 465, -1e9,
    57344, 61440, 1 / 0, -1 / 0, 0 / 0 }
  local x = lab.cat({ lab.randn(4099):mul(200), lab.randn(4099):mul(1e-3), lab.tensor(specials) })
  for _, dt in ipairs({ "f8e4m3", "f8e5m2" }) do
    local c, g = x:to(dt):to("f32"), x:to(G.dev):to(dt):cpu():to("f32")
    T.eq(g.dtype, "f32")
    local nan_c, nan_g = c:ne(c), g:ne(g)
    T.eq(lab.max_abs_diff(nan_c:to("f32"), nan_g:to("f32")), 0, dt .. ": NaN in the same places")
    local cf, gf = lab.where(nan_c, lab.zeros_like(c), c), lab.where(nan_g, lab.zeros_like(g), g)
    T.eq(lab.max_abs_diff(cf, gf), 0, dt .. ": every other value equal")
  end
end)

T.test("cuBLASLt against OpenBLAS", function()
  for _, dt in ipairs({ "f32", "f64", "bf16", "f16" }) do
    local a, b = lab.randn(3, 65, 127):to(dt), lab.randn(127, 33):to(dt)
    twin("matmul " .. dt, function(x, y) return x:matmul(y) end, { a, b }, dt == "f32" and 1e-4 or nil)
    twin("matmul transposed " .. dt, function(x, y) return x:transpose(2, 3):matmul(x) end, { a, b }, dt == "f32" and 1e-4 or nil)
  end
end)

T.test("the same seed gives the same numbers", function()
  lab.manual_seed(3)
  local c = lab.rand(1001)
  local ci = lab.randint(0, 1000, { 77 })
  lab.manual_seed(3)
  local g = lab.rand(1001, { device = G.dev })
  local gi = lab.randint(0, 1000, { 77 }, { device = G.dev })
  T.eq(G.rel_err(g, c), 0, "uniform draws are bit-identical")
  T.eq(G.rel_err(gi, ci), 0, "integer draws are bit-identical")
end)

T.test("the caching allocator reuses freed blocks", function()
  collectgarbage()
  local before = lab.mem.stats(G.dev)
  for _ = 1, 20 do
    local t <close> = lab.zeros(1000, 1000, { device = G.dev })
  end
  local after = lab.mem.stats(G.dev)
  T.eq(after.current, before.current, "every block given back")
  T.raises(function() return lab.zeros(1 << 40, { device = G.dev }) end, "out of memory", "bytes")
end)

T.finish()
