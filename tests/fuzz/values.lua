-- Hostile argument values for tests/fuzz/fuzz.lua. Every value comes with a recipe: a Lua
-- expression that builds it, so a failing call prints as a line a person can paste into
-- `build/llmlab -e`. Tensors are built by evaluating their recipe (the recipe is the truth,
-- not a description of it). The generator is a seeded xorshift in plain Lua, so every rank
-- draws the same values in the same order and collectives get identical calls.
local V = {}
V.__index = V

function V.new(seed, tmpdir)
  local self = setmetatable({ s = (seed * 0x9E3779B97F4A7C15) ~ 0x2545F4914F6CDD1D, tmpdir = tmpdir }, V)
  if self.s == 0 then self.s = 1 end
  for _ = 1, 8 do self:next() end
  return self
end

function V:next()
  local s = self.s
  s = s ~ (s << 13)
  s = s ~ (s >> 7)
  s = s ~ (s << 17)
  self.s = s
  return s
end

function V:int(n) return (self:next() >> 1) % n + 1 end     -- 1..n
function V:chance(p) return self:int(1000000) <= p * 1000000 end
function V:pick(list) return list[self:int(#list)] end

-- ---- scalars ----
-- huge integers for any argument: each is refused as a size (over 2^48 bytes) or negative,
-- so none can make a call allocate gigabytes on a shared machine (not even as an arange
-- bound: arange(0.5, -2^31, -1.5) is a real 5.7 GB tensor, which the ASan lane once made)
local huge_ints = { 1 << 50, 1 << 62, math.maxinteger, math.mininteger, -(1 << 62) }
-- for dims and indices only: values that a 32-bit truncation turns into small valid ones
-- (2^32 + 2 -> 2), but that as a size would be a real 16 GB tensor
local truncating_ints = { 1 << 31, -(1 << 31), (1 << 32) + 2, (1 << 32) + 1 }
local sizes_small = { 0, 1, 1, 2, 2, 3, 4, 5, 8 }
-- absurd sizes: never between ~2^26 and 2^48 elements, so no call can legitimately try to
-- allocate gigabytes on a shared machine; each of these must be refused
local sizes_absurd = { 1 << 50, 1 << 62, math.maxinteger, -1, -(1 << 62), math.mininteger }
local floats = { 0.0, -0.0, 0.5, -1.5, 1e-300, 1e300, -1e300, 1 / 0, -1 / 0, 0 / 0, 2 ^ 53, 2 ^ 63, 3.7 }

local function num_recipe(x)
  if math.type(x) == "integer" then
    if x == math.mininteger then return "math.mininteger" end
    if x == math.maxinteger then return "math.maxinteger" end
    return string.format("%d", x)
  end
  if x ~= x then return "(0/0)" end
  if x == 1 / 0 then return "(1/0)" end
  if x == -1 / 0 then return "(-1/0)" end
  if x == 0 and 1 / x < 0 then return "(-0.0)" end
  return string.format("%.17g", x)
end
V.num_recipe = num_recipe

function V:size()
  if self:chance(0.9) then return self:pick(sizes_small) end
  return self:pick(sizes_absurd)
end

function V:dim()
  local r = self:int(10)
  if r <= 7 then return self:int(5) - 3 end        -- -2..2 (0 is invalid: dims are 1-based)
  if r == 8 then return self:pick({ 3, 4, 5, -4, -9 }) end
  if r == 9 then return self:pick(self:chance(0.5) and huge_ints or truncating_ints) end
  return self:pick({ 1.5, 0 / 0, 2.0 })
end

function V:integer()
  local r = self:int(10)
  if r <= 6 then return self:int(7) - 3 end
  if r <= 9 then return self:pick(huge_ints) end
  return self:pick({ 2.0, 0.5 })
end

function V:number()
  if self:chance(0.5) then return self:pick(floats) end
  return self:integer()
end

local dtypes = { "f32", "f64", "i32", "i64", "bf16", "f16", "bool" }
V.dtypes = dtypes
function V:dtype()
  if self:chance(0.85) then return self:pick(dtypes) end
  return self:pick({ "f8", "", "F32", "float32", "cpu" })
end

-- strings: never an absolute path outside the run's own directory (the fuzzer runs in a
-- fresh temporary directory, so relative names land there), never "..", never a quote a
-- shell could see as the end of a word
function V:string()
  return self:pick({ "", "a", "sum", "max", "avg", "f32", "cpu", "sim", "cuda", "cuda:7", "tanh", "none",
    "x.npy", "ckpt", "sub/dir/x.npy", self.tmpdir .. "/y.npy", "/nonexistent_llmlab_fuzz/x.npy",
    string.rep("z", 300), "a\0b", "\xff\xfe" })
end

-- ---- tensors ----
local float_dtypes = { "f32", "f64", "bf16", "f16" }

local function shape_recipe(shape)
  local parts = {}
  for i, n in ipairs(shape) do parts[i] = num_recipe(n) end
  return table.concat(parts, ", ")
end

-- a shape of small sizes (the tensors the fuzzer builds are real and must stay small)
function V:small_shape()
  local nd = self:pick({ 0, 1, 1, 2, 2, 2, 3, 4 })
  local shape = {}
  for i = 1, nd do shape[i] = self:pick({ 1, 2, 3, 4, 0, 2, 3 }) end
  return shape
end

-- the recipe of a fresh tensor: a factory, a dtype, maybe requires_grad, maybe a view
function V:tensor_recipe()
  local shape = self:small_shape()
  local dt = self:pick(dtypes)
  local r
  local k = self:int(7)
  if k == 1 then
    r = string.format("lab.zeros(%s{dtype='%s'})", #shape > 0 and shape_recipe(shape) .. ", " or "", dt)
  elseif k == 2 then
    r = string.format("lab.ones(%s{dtype='%s'})", #shape > 0 and shape_recipe(shape) .. ", " or "", dt)
  elseif k == 3 or k == 4 then
    dt = self:pick(float_dtypes)
    local grad = self:chance(0.3) and ", requires_grad=true" or ""
    r = string.format("lab.randn(%s{dtype='%s'%s})", #shape > 0 and shape_recipe(shape) .. ", " or "", dt, grad)
  elseif k == 5 then
    -- special values
    local vals = {}
    for i = 1, self:int(5) do vals[i] = num_recipe(self:pick({ 0 / 0, 1 / 0, -1 / 0, -0.0, 1e38, -7, 3, 0.5 })) end
    r = string.format("lab.tensor({%s}, {dtype='%s'})", table.concat(vals, ", "), self:pick({ "f32", "f64", "bf16", "f16" }))
    shape = { #vals }
  elseif k == 6 then
    -- integer ids, some out of any table's range
    local vals = {}
    for i = 1, self:int(4) do vals[i] = num_recipe(self:pick({ 1, 2, 3, 0, -1, 7, 1 << 31, math.maxinteger })) end
    r = string.format("lab.tensor({%s}, {dtype='%s'})", table.concat(vals, ", "), self:pick({ "i64", "i32" }))
    shape = { #vals }
  else
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    r = string.format("lab.arange(%d, {dtype='%s'})", n, self:pick({ "f32", "i64", "f64" }))
    shape = { n }
    if #shape > 0 and n == 6 and self:chance(0.5) then
      r = r .. ":view(2, 3)"
      shape = { 2, 3 }
    end
  end
  -- a strided or broadcast view of it
  if #shape >= 2 and self:chance(0.25) then
    r = r .. (#shape == 2 and ":t()" or ":transpose(1, 2)")
    shape[1], shape[2] = shape[2], shape[1]
  elseif #shape >= 1 and shape[1] >= 2 and self:chance(0.15) then
    r = r .. string.format(":narrow(1, 2, %d)", shape[1] - 1)
    shape[1] = shape[1] - 1
  elseif #shape >= 1 and shape[#shape] == 1 and self:chance(0.3) then
    r = r .. string.format(":expand(%s%d)", #shape > 1 and shape_recipe({ table.unpack(shape, 1, #shape - 1) }) .. ", " or "", 3)
  elseif #shape >= 1 and self:chance(0.1) then
    r = r .. ":unsqueeze(1)"
  end
  if self:chance(0.03) then
    r = "(function() local t = " .. r .. "; t:close(); return t end)()"
  end
  return r
end

-- nested tables for lab.tensor: regular, ragged, empty, mixed types
function V:nested(depth)
  depth = depth or 0
  local k = self:int(10)
  if depth >= 3 or k <= 4 then
    local x = self:pick({ 1, 2.5, 0 / 0, 1 / 0, true, math.maxinteger, math.mininteger, "s", -3 })
    return x, (type(x) == "string" and "'s'" or tostring(x) == "true" and "true" or num_recipe(x))
  end
  local n = self:int(4) - 1
  local vals, recs = {}, {}
  for i = 1, n do vals[i], recs[i] = self:nested(depth + 1) end
  if k == 10 and n >= 1 then -- make it ragged on purpose
    vals[n + 1], recs[n + 1] = { 1, 2, 3 }, "{1, 2, 3}"
  end
  return vals, "{" .. table.concat(recs, ", ") .. "}"
end

return V
