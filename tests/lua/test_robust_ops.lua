-- Op arguments a kernel cannot give a right answer for are refused, naming the op, the value
-- and the rank (issue 11): embedding ids out of range (id -1 read out of bounds and its
-- backward ended in a double free), integer % by 0 and -1 (math.mininteger % -1 was SIGFPE),
-- integer pow with a negative exponent (gave 0), clamp bounds an integer dtype cannot hold
-- (gave 0s), dropout p NaN. Integer arithmetic wraps as Lua's does; // and % follow Lua's
-- integer // and % (the reference is Lua itself). Run at 1 and 2 ranks.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local R = "rank " .. lab.dist.rank() .. ": "
local function i64(t) return lab.tensor(t, { dtype = "i64" }) end

T.test("embedding ids outside [0, vocab) are refused, forward and through backward", function()
  local w = lab.ones(3, 2, { requires_grad = true })
  T.raises(function() return lab.embedding(i64({ -1 }), w) end, R .. "embedding: id -1 at position 1 is outside [0, 3)")
  T.raises(function() return lab.embedding(i64({ 0, 3 }), w) end, R .. "embedding: id 3 at position 2")
  T.raises(function() return lab.embedding(i64({ math.mininteger }), w) end, R .. "embedding: id -9223372036854775808")
  T.raises(function() return lab.embedding(lab.tensor({ { 0, -1 } }, { dtype = "i32" }), w) end, R .. "embedding: id -1 at position 2")
  for _ = 1, 20 do -- the double free came after a loop of refused forwards and backwards
    pcall(lab.embedding, i64({ -1, 2 }), w)
    local y = lab.embedding(i64({ 0, 2, 2 }), w)
    y:sum():backward()
  end
  T.values(w.grad, { { 20, 20 }, { 0, 0 }, { 40, 40 } }, 0, "gradient of the good calls only")
  local m = lab.nn.Embedding(4, 2)
  T.raises(function() return m(i64({ 4 })) end, R .. "embedding: id 4")
end)

T.test("integer remainder and division by -1 and 0", function()
  T.values(i64({ math.mininteger }) % -1, { 0 }, 0, "mininteger % -1 is 0, as in Lua")
  T.eq((i64({ math.mininteger }) % -1)[1], math.mininteger % -1, "same as Lua")
  T.values(i64({ -7, 7, 0 }) % -1, { 0, 0, 0 }, 0, "x % -1")
  T.values(i64({ -7, 7 }) % 3, { -7 % 3, 7 % 3 }, 0, "floored, as Lua")
  T.values(i64({ -7, 7 }) % -3, { -7 % -3, 7 % -3 }, 0, "floored, as Lua")
  T.values(lab.tensor({ -7, 7 }, { dtype = "i32" }):remainder(-1), { 0, 0 }, 0, "i32 % -1")
  T.raises(function() return i64({ 5 }) % 0 end, R .. "remainder: integer remainder by zero")
  T.raises(function() return i64({ 5, 6 }) % i64({ 1, 0 }) end, R .. "remainder: integer remainder by zero")
  local t = i64({ 5 })
  T.raises(function() t:remainder_(0) end, R .. "remainder: integer remainder by zero")
  T.eq(t[1], 5, "a refused in-place op leaves the tensor alone")
  T.near((lab.tensor({ 5.0 }) % 0)[1] ~= (lab.tensor({ 5.0 }) % 0)[1] and 1 or 0, 1, 0, "float % 0 is NaN, as PyTorch")
end)

T.test("// floor-divides as Lua's //, by -1 too; integer // 0 is an error", function()
  local xs = { math.mininteger, math.mininteger + 1, -7, -1, 0, 1, 7, math.maxinteger }
  local ys = { -3, -2, -1, 1, 2, 5 }
  for _, y in ipairs(ys) do
    local q, r = i64(xs) // y, i64(xs) % y
    for k, x in ipairs(xs) do
      T.eq(q[k], x // y, string.format("%d // %d", x, y))
      T.eq(r[k], x % y, string.format("%d %% %d", x, y))
    end
  end
  T.values(lab.tensor({ -7, 7 }, { dtype = "i32" }):floor_divide(-1), { 7, -7 }, 0, "i32 // -1")
  T.raises(function() return i64({ 5 }) // 0 end, R .. "floor_divide: integer division by zero")
  T.raises(function() return i64({ 5, 6 }):floor_divide(i64({ 2, 0 })) end, R .. "floor_divide: integer division by zero")
  T.values(lab.tensor({ -7.5, 7.5 }) // 2, { -7.5 // 2, 7.5 // 2 }, 0, "floats floor-divide as Lua's //")
  T.eq((lab.tensor({ 1.0 }) // 0)[1], 1.0 // 0, "float // 0 is inf, as in Lua")
end)

T.test("integer arithmetic wraps as Lua's integers do", function()
  T.eq((i64({ math.maxinteger }) + 1)[1], math.maxinteger + 1, "maxinteger + 1")
  T.eq((i64({ math.mininteger }) - 1)[1], math.mininteger - 1, "mininteger - 1")
  T.eq((i64({ math.maxinteger }) * 3)[1], math.maxinteger * 3, "maxinteger * 3")
  T.eq((-i64({ math.mininteger }))[1], -math.mininteger, "-mininteger")
  T.eq(i64({ math.mininteger }):abs()[1], math.mininteger, "abs(mininteger), as PyTorch")
  T.eq(i64({ math.maxinteger, 7 }):prod():item(), math.maxinteger * 7, "prod wraps (fuzz: UBSan in reduce.c)")
  T.eq(i64({ math.maxinteger, 2 }):sum():item(), math.maxinteger + 2, "sum wraps")
  local r = 1
  for _ = 1, 41 do r = r * 3 end
  T.eq((i64({ 3 }) ^ 41)[1], r, "3^41 wraps as repeated Lua multiplication")
  T.values(lab.tensor({ 1, 2 }, { dtype = "i32" }):clamp({ max = 1 }), { 1, 1 }, 0, "clamp{max=} alone")
  T.values(lab.tensor({ 1, 5 }):clamp({ min = 2, max = 4 }), { 2, 4 }, 0, "clamp{min=, max=}")
end)

T.test("integer pow with a negative exponent is an error, as in PyTorch", function()
  T.raises(function() return i64({ 2 }) ^ -1 end, R .. "pow: integers to negative integer powers are not allowed (exponent -1")
  T.raises(function() return i64({ 2, 3 }):pow(i64({ 1, -2 })) end, R .. "pow:", "exponent -2")
  T.raises(function() return lab.tensor({ 2 }, { dtype = "i32" }):pow_(-3) end, R .. "pow:", "exponent -3")
  T.values(i64({ 2, -3 }) ^ 3, { 8, -27 }, 0, "non-negative exponents")
  T.values(i64({ 1, -1 }) ^ 0, { 1, 1 }, 0, "x^0")
  T.near((i64({ 2 }) ^ -1.0)[1], 0.5, 0, "a float exponent promotes to float")
end)

T.test("clamp bounds an integer tensor cannot hold are refused", function()
  local t = lab.tensor({ 2, 7 }, { dtype = "i32" })
  T.raises(function() return t:clamp(0.5, 1e300) end, R .. "clamp: min 0.5 is not an integer, and the tensor is i32")
  T.raises(function() return t:clamp(0, 1e300) end, R .. "clamp: max 1e+300 cannot be converted to i32 without overflow")
  T.raises(function() return t:clamp(0, 1 << 40) end, R .. "clamp: max 1099511627776 cannot be converted to i32")
  T.raises(function() return i64({ 1 }):clamp(0, 2.0 ^ 63) end, R .. "clamp: max 9.22337203685478e+18 cannot be converted to i64")
  T.raises(function() return i64({ 1 }):clamp(0 / 0) end, R .. "clamp: min", "cannot be converted to i64")
  T.raises(function() t:clamp_({ max = 2 ^ 40 }) end, R .. "clamp_: max")
  T.values(t:clamp(3, 5), { 3, 5 }, 0, "bounds inside the range")
  T.values(t:clamp(-2147483648, 2147483647), { 2, 7 }, 0, "the i32 range itself")
  T.values(i64({ -5, 5 }):clamp(math.mininteger, 1), { -5, 1 }, 0, "mininteger as a bound")
  T.values(lab.tensor({ 0.25, 3 }):clamp(0.5, 1e300), { 0.5, 3 }, 0, "float tensors take any bound")
end)

T.test("dropout and cross_entropy probabilities must be numbers in range", function()
  T.raises(function() return lab.dropout(lab.ones(4), 0 / 0) end, R .. "dropout: probability", "must be in [0, 1)")
  T.raises(function() return lab.dropout(lab.ones(4), 1) end, R .. "dropout: probability 1 must be in [0, 1)")
  T.raises(function() return lab.dropout(lab.ones(4), -0.1) end, R .. "dropout: probability -0.1")
  T.raises(function() return lab.cross_entropy(lab.ones(2, 3), i64({ 0, 1 }), { label_smoothing = 0 / 0 }) end,
    R .. "cross_entropy: label_smoothing")
  T.eq(lab.dropout(lab.ones(4), 0):sum():item(), 4, "p = 0 keeps everything")
end)

T.finish()
