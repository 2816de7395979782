-- Sizes that cannot exist, out-of-range narrow/select/index and ragged tables are refused with
-- an error naming the op, the values and the rank, never a tensor of 0 bytes that is then read
-- (issue 11: lab.zeros(1 << 62) had numel 2^62 and nbytes 0; narrow's start + length wrapped;
-- lab.tensor{1, {}} segfaulted). Run at 1 and 2 ranks.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r = lab.dist.rank()
local R = "rank " .. r .. ": "

T.test("factories refuse sizes whose product overflows or exceeds 2^48 bytes", function()
  T.raises(function() return lab.zeros(1 << 62) end, R .. "zeros: shape [4611686018427387904] needs 2^62 elements x 4 bytes", "2^48 bytes")
  T.raises(function() return lab.zeros(1 << 32, 1 << 32) end, R .. "zeros: shape [4294967296, 4294967296] needs about 2^64 elements")
  T.raises(function() return lab.empty(1 << 62) end, R .. "empty: shape")
  T.raises(function() return lab.full(1 << 62, 2) end, R .. "full: shape", "x 8 bytes")
  T.raises(function() return lab.rand(1 << 62) end, R .. "rand: shape")
  T.raises(function() return lab.randn({ 1 << 40, 1 << 20 }) end, R .. "randn: shape [1099511627776, 1048576]")
  T.raises(function() return lab.randint(0, 5, { 1 << 62 }) end, R .. "randint: shape")
  T.raises(function() return lab.zeros(math.maxinteger) end, R .. "zeros: shape [9223372036854775807] needs 9223372036854775807 elements")
  T.raises(function() return lab.zeros(1 << 46, { dtype = "f64" }) end, "2^46 elements x 8 bytes")
  T.raises(function() return lab.zeros(-1) end, R .. "zeros: negative size -1 in dim 1")
  T.raises(function() return lab.arange(0, 1e300) end, R .. "arange:", "more than a tensor may hold")
  T.raises(function() return lab.arange(0, 0 / 0) end, R .. "arange:")
  -- an empty tensor's other sizes are multiplied too (strides, reductions): they must fit
  -- (fuzz finding numel_overflow_zero_dim: lab.empty(8, 2^62, 0) overflowed in lab_numel)
  T.raises(function() return lab.empty(8, 1 << 62, 0) end, R .. "empty: shape [8, 4611686018427387904, 0] needs about 2^65 elements", "not counting the 0")
  T.raises(function() return lab.zeros(0, 1 << 62) end, R .. "zeros: shape [0, 4611686018427387904]", "not counting the 0")
  T.eq(lab.zeros(1 << 12, 0, 1 << 20):numel(), 0, "zero between sane sizes")
  T.eq(lab.zeros(1 << 12, 0, 1 << 20):sum(1).shape[2], 1 << 20, "and reductions over it")
end)

T.test("views and expand refuse sizes that cannot exist", function()
  T.raises(function() return lab.zeros(0):view(1 << 32, 1 << 32) end, R .. "view: shape [4294967296, 4294967296] needs about 2^64")
  T.raises(function() return lab.zeros(0):reshape(1 << 32, 1 << 32) end, R .. "reshape: shape")
  T.raises(function() return lab.zeros(4):view(-1, 1 << 62) end, R .. "view: shape [1, 4611686018427387904]")
  T.raises(function() return lab.ones(1):expand(1 << 62) end, R .. "expand: shape [4611686018427387904] needs 2^62")
  T.raises(function() return lab.ones(1):expand(1 << 62, 1 << 62) end, R .. "expand: shape", "about 2^124 elements")
  T.raises(function() return lab.ones(1):expand(-2) end, R .. "expand:")
  T.eq(lab.ones(1):expand(1 << 20):contiguous():sum():item(), 1 << 20, "a large expand that fits still works")
end)

T.test("nn constructors name the module", function()
  T.raises(function() return lab.nn.Linear(1 << 62, 1) end, R .. "Linear: empty: shape [1, 4611686018427387904]")
  T.raises(function() return lab.nn.RMSNorm(1 << 62) end, R .. "RMSNorm: ones: shape [4611686018427387904]")
  T.raises(function() return lab.nn.Embedding(1 << 40, 1 << 20) end, R .. "Embedding:")
end)

-- a .npy file with the given header dict and n bytes of data
local function npy(dict, nbytes)
  local path = os.tmpname()
  local h = dict
  local total = 10 + #h + 1
  h = h .. string.rep(" ", (64 - total % 64) % 64) .. "\n"
  local f = assert(io.open(path, "wb"))
  f:write("\x93NUMPY\1\0", string.char(#h % 256, #h // 256), h, string.rep("\0", nbytes))
  f:close()
  return path
end

T.test(".npy headers with impossible shapes are refused", function()
  local cases = {
    { "(4611686018427387904,)", "needs 2^62 elements x 4 bytes" },
    { "(99999999999999999999999,)", "does not fit in 64 bits" },
    { "(4294967296, 4294967296)", "needs about 2^64 elements" },
    { "(1024, 1024)", "data is shorter than the 4194304 bytes its header promises" },
  }
  for _, c in ipairs(cases) do
    local p = npy("{'descr': '<f4', 'fortran_order': False, 'shape': " .. c[1] .. ", }", 16)
    T.raises(function() return lab.load_npy(p) end, R .. "load_npy: " .. p, c[2])
    os.remove(p)
  end
  local p = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16)
  T.values(lab.load_npy(p), { { 0, 0 }, { 0, 0 } }, 0, "a good file still loads")
  os.remove(p)
  -- an empty tensor round-trips (its NULL data pointer reached fwrite: fuzz finding save_npy_empty)
  p = os.tmpname()
  lab.zeros(0, 3):save_npy(p)
  local back = lab.load_npy(p)
  T.eq(back.shape[1], 0, "empty tensor shape 1")
  T.eq(back.shape[2], 3, "empty tensor shape 2")
  os.remove(p)
end)

T.test("narrow, slice, select and indexing are bounds-checked without wrapping", function()
  T.raises(function() return lab.ones(4):narrow(1, 2, math.maxinteger) end, R .. "narrow: start 2 with length 9223372036854775807 does not fit dim 1 of size 4")
  T.raises(function() return lab.ones(2, 3):narrow(1, math.maxinteger, 2) end, R .. "narrow: start 9223372036854775807")
  T.raises(function() return lab.ones(2, 3):narrow(1, math.mininteger, 1) end, R .. "narrow: start -9223372036854775808")
  T.raises(function() return lab.ones(2, 3):narrow(2, -4, 1) end, R .. "narrow: start -4 with length 1 does not fit dim 2 of size 3")
  T.raises(function() return lab.ones(2, 3):narrow(2, 1, -1) end, R .. "narrow: start 1 with length -1")
  T.eq(lab.ones(2, 3):narrow(2, 4, 0):numel(), 0, "an empty narrow at the end, as in PyTorch")
  T.values(lab.tensor({ 1, 2, 3 }):narrow(1, -2, 2), { 2, 3 }, 0, "negative start counts from the end")
  T.raises(function() return lab.ones(2)[-3] end, R .. "index: index -3 out of range for dim 1 of size 2")
  T.raises(function() return lab.ones(2)[math.mininteger] end, R .. "index: index -9223372036854775808")
  T.raises(function() return lab.ones(2)[3] end, R .. "index: index 3 out of range")
  T.raises(function() local t = lab.ones(2) t[-5] = 1 end, R .. "index assignment: index -5 out of range")
  T.raises(function() return lab.ones(2, 3):select(2, -4) end, R .. "select: index -4 out of range for dim 2 of size 3")
  T.raises(function() return lab.ones(2, 3):select(2, math.maxinteger) end, R .. "select: index 9223372036854775807")
  T.raises(function() return lab.ones(4):slice(1, -9, 2) end, R .. "slice: range -9..2 is outside dim 1 of size 4")
  T.raises(function() return lab.ones(4):slice(1, 1, math.maxinteger) end, R .. "slice: range 1..9223372036854775807")
  T.eq(lab.ones(2)[-2], 1.0, "t[-2] is the first element")
end)

T.test("ragged and mixed nested tables name the rows", function()
  T.raises(function() return lab.tensor({ 1, {} }) end, R .. "lab.tensor: ragged table: row 2 is a list of 0 elements, row 1 is a number")
  T.raises(function() return lab.tensor({ 1, { 2, 3, 4 } }) end, R .. "lab.tensor: ragged table: row 2 is a list of 3 elements, row 1 is a number")
  T.raises(function() return lab.tensor({ { 1 }, { 2, 3, 4 } }) end, R .. "lab.tensor: ragged table: row 2 has 3 elements, row 1 has 1")
  T.raises(function() return lab.tensor({ { 1, 2 }, 3 }) end, R .. "lab.tensor: ragged table: row 2 is a number, row 1 is a list of 2 elements")
  T.raises(function() return lab.tensor({ { { 1, 2 }, { 3, 4 } }, { { 1, 2 }, { 3 } } }) end,
    R .. "lab.tensor: ragged table: row [2][2] has 1 elements, row [1][1] has 2")
  T.raises(function() return lab.tensor({ { 1, "x" } }) end, R .. "lab.tensor: row [1][2] is a string")
  T.eq(#lab.tensor({ {}, {} }).shape, 2, "{{}, {}} is [2, 0]")
  T.eq(lab.tensor({ {}, {} }).shape[2], 0, "{{}, {}} is [2, 0]")
  T.eq(lab.tensor({}):numel(), 0, "{} is [0]")
  T.values(lab.tensor({ { 1, 2 }, { 3, 4 } }), { { 1, 2 }, { 3, 4 } }, 0, "a regular table")
end)

T.finish()
