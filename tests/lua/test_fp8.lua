-- FP8 dtypes from Lua: f8e4m3 and f8e5m2 round and saturate as kernels/cpu/fp8.h says (the
-- bit-level classes are in tests/unit/test_fp8.c against NVIDIA's table; here the values a user
-- sees), print with their dtype, travel through checkpoints as safetensors F8_E4M3 / F8_E5M2,
-- move through collectives that copy, and are refused by those that would reduce them.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local common = require("ckpt_common")
local r, world = lab.dist.rank(), lab.dist.world_size()

local function bits_equal(a, b)
  -- NaN ~= NaN, so compare the f32 images element by element with NaN matched to NaN
  local x, y = a:to("f32"):reshape(-1):tolist(), b:to("f32"):reshape(-1):tolist()
  if #x ~= #y then return false end
  for i = 1, #x do
    if not (x[i] == y[i] or (x[i] ~= x[i] and y[i] ~= y[i])) then return false end
  end
  return true
end

T.test("to('f8e4m3') and to('f8e5m2'): nearest even, saturation, NaN, subnormals", function()
  local x = lab.tensor({ 1, -1.0625, 1.1875, 448, 464, 1000, -1e30, 2 ^ -9, 2 ^ -10, 1.5 * 2 ^ -10, 1 / 0, 0 / 0 })
  local q = x:to("f8e4m3")
  T.eq(q.dtype, "f8e4m3")
  local v = q:to("f32"):tolist()
  -- by hand from the OCP spec: 3 mantissa bits, max 448, no infinity, smallest subnormal 2^-9
  local want = { 1, -1, 1.25, 448, 448, 448, -448, 2 ^ -9, 0, 2 ^ -9, 448 }
  for i, w in ipairs(want) do T.eq(v[i], w, "e4m3 element " .. i) end
  T.ok(v[12] ~= v[12], "NaN stays NaN")
  local e5 = x:to("f8e5m2"):to("f32"):tolist()
  -- 2 mantissa bits, max 57344; infinity saturates to max as NVIDIA's satfinite conversion
  local want5 = { 1, -1, 1.25, 448, 448, 1024, -57344, 2 ^ -9, 2 ^ -10, 1.5 * 2 ^ -10, 57344 }
  for i, w in ipairs(want5) do T.eq(e5[i], w, "e5m2 element " .. i) end
  T.eq(lab.tensor({ 3 }):to("float8_e4m3fn").dtype, "f8e4m3", "PyTorch's name works too")
end)

T.test("FP8 tensors print their dtype, compute in f32 and store FP8", function()
  local q = lab.tensor({ 0.1, 2, -3 }):to("f8e5m2")
  T.ok(tostring(q):find("dtype=f8e5m2", 1, true), "printing names the dtype: " .. tostring(q))
  T.eq((q + q).dtype, "f8e5m2", "an op of FP8 tensors stores FP8")
  T.eq((q + lab.tensor({ 1.5, 1, 1 })).dtype, "f32", "FP8 with f32 promotes to f32")
  T.eq((q + lab.tensor({ 1, 1, 1 })).dtype, "f8e5m2", "with an integer tensor it stays FP8 (as bf16 does)")
  T.eq((q:to("f8e4m3") + lab.tensor({ 1, 1, 1 }, { dtype = "bf16" })).dtype, "f32", "with bf16: f32")
  -- a product of FP8 operands is accumulated in f32: 16 * (0.1 -> 0.09375)^2 is exact in f32
  local a = lab.full({ 1, 16 }, 0.1):to("f8e4m3")
  T.eq(a:to("f32"):matmul(a:to("f32"):t())[1][1], 16 * 0.1015625 ^ 2, "e4m3(0.1) = 0.1015625")
  T.eq(q:to("f32"):to("f8e5m2"):to("f32"):tolist()[1], q:to("f32"):tolist()[1], "round trip is idempotent")
end)

T.test("checkpoints hold FP8 tensors as F8_E4M3 / F8_E5M2, bit for bit", function()
  local M = lab.nn.class("F8Holder")
  function M:init(seed)
    lab.manual_seed(seed)
    self:param("a", lab.randn(5, 3):mul(100):to("f8e4m3"))
    self:param("b", lab.randn(7):to("f8e5m2"))
    lab.dist.broadcast(self.a, 0) -- one model on every rank (a broadcast of FP8 bytes)
    lab.dist.broadcast(self.b, 0)
  end
  function M:forward(x) return x end
  local dir = common.tmpdir("fp8")
  local m = M(1)
  local path = lab.ckpt.save(dir, { model = m, step = 1 })
  local m2 = M(2)
  T.ok(not bits_equal(m.a, m2.a), "the second model starts different")
  lab.ckpt.load(dir, { model = m2 })
  T.eq(m2.a.dtype, "f8e4m3")
  T.ok(bits_equal(m.a, m2.a) and bits_equal(m.b, m2.b), "every FP8 value comes back")
  local file = common.read(string.format("%s/rank%05d.safetensors", path, r))
  T.ok(file:find('"F8_E4M3"', 1, true) and file:find('"F8_E5M2"', 1, true), "the header names the safetensors FP8 dtypes")
  common.remove(dir)
end)

T.test("collectives move FP8 bytes and refuse to reduce them", function()
  local q = lab.full({ 4 }, r + 0.5):to("f8e4m3")
  local out = lab.zeros(4 * world, { dtype = "f8e4m3" })
  lab.dist.all_gather_into_tensor(out, q)
  for k = 0, world - 1 do T.eq(out[k * 4 + 1], k + 0.5, "all_gather of rank " .. k) end
  T.raises(function() lab.dist.all_reduce(q) end, "rank " .. r, "all_reduce", "f8e4m3", "cannot be reduced")
end)

T.test("the sim device converts as the cpu does", function()
  local x = lab.randn(64):mul(300)
  local s = x:to("sim"):to("f8e4m3")
  T.eq(s.device, "sim:0")
  T.ok(bits_equal(s:cpu(), x:to("f8e4m3")), "sim and cpu agree")
end)

T.finish()
