-- Regression tests for what tests/fuzz found in files no other change was fixing. Each was
-- undefined behaviour that release builds happened to survive; the sanitizer lane (build-asan/,
-- which runs this file) fails on them, and the values are checked here in every build.
local T = dofile((arg[0]:match("(.*/)") or "./") .. "../harness.lua")

T.test("exp, sigmoid and tanh of NaN, infinities and huge values (fastmath.h shifted floor(NaN))", function()
  local x = lab.tensor({ 0 / 0, 1 / 0, -1 / 0, 1e38, -1e38, 0, 1 })
  local e = x:exp():tolist()
  T.ok(e[1] ~= e[1], "exp(NaN) is NaN")
  T.eq(e[2], 1 / 0, "exp(inf)")
  T.eq(e[3], 0.0, "exp(-inf)")
  T.eq(e[4], 1 / 0, "exp(1e38)")
  T.eq(e[5], 0.0, "exp(-1e38)")
  T.eq(e[6], 1.0, "exp(0)")
  T.near(e[7], math.exp(1), 1e-6, "exp(1)")
  local s = x:sigmoid():tolist()
  T.ok(s[1] ~= s[1], "sigmoid(NaN) is NaN")
  T.eq(s[2], 1.0, "sigmoid(inf)")
  T.eq(s[3], 0.0, "sigmoid(-inf)")
  local t = x:tanh():tolist()
  T.ok(t[1] ~= t[1], "tanh(NaN) is NaN")
  T.eq(t[2], 1.0, "tanh(inf)")
  T.eq(t[3], -1.0, "tanh(-inf)")
  for _, dt in ipairs({ "f16", "bf16" }) do
    local h = lab.tensor({ 0 / 0, 1 / 0 }, { dtype = dt }):exp():tolist()
    T.ok(h[1] ~= h[1] and h[2] == 1 / 0, dt .. " exp of NaN and inf")
  end
end)

T.test("randint over ranges wider than 2^63 (philox.c computed hi - lo in int64)", function()
  lab.manual_seed(3)
  for _, range in ipairs({ { -1, math.maxinteger }, { math.mininteger, math.maxinteger }, { math.mininteger, 0 } }) do
    local lo, hi = range[1], range[2]
    local v = lab.randint(lo, hi, { 64 }):tolist()
    local distinct, neg, pos = {}, 0, 0
    for _, x in ipairs(v) do
      T.ok(x >= lo and x < hi, string.format("randint(%d, %d) gave %d", lo, hi, x))
      distinct[x] = true
      if x < 0 then neg = neg + 1 else pos = pos + 1 end
    end
    local n = 0
    for _ in pairs(distinct) do n = n + 1 end
    T.ok(n > 60, "64 draws over 2^63 values are distinct")
    -- half of [mininteger, maxinteger) is negative: 64 draws all on one side would mean the
    -- range wrapped (chance 2^-63)
    if lo == math.mininteger and hi == math.maxinteger then T.ok(neg > 0 and pos > 0, "both signs drawn") end
    if hi == 0 then T.eq(pos, 0, "randint(mininteger, 0) draws negatives only") end
  end
end)

T.test("embedding with 0-wide rows (nn.c copied rows from a NULL weight)", function()
  local w = lab.randn(2, 0, { requires_grad = true })
  local y = lab.embedding(lab.tensor({ 0, 1, 0 }, { dtype = "i64" }), w)
  T.eq(table.concat(y.shape, ","), "3,0", "shape")
  y:sum():backward()
  T.eq(table.concat(w.grad.shape, ","), "2,0", "gradient shape")
end)

T.test("integer sum and prod wrap as Lua's integers do (reduce.c overflowed int64)", function()
  local M = math.maxinteger
  local x = lab.tensor({ M, M, M }, { dtype = "i64" })
  T.eq(x:prod():item(), M * M * M, "prod of three maxintegers")
  T.eq(x:sum():item(), M + M + M, "sum of three maxintegers")
  local e = lab.tensor({ M }, { dtype = "i64" }):expand(3)
  T.eq(e:prod():item(), M * M * M, "prod over an expanded view")
  T.eq(lab.tensor({ M, 1 }, { dtype = "i64" }):sum():item(), math.mininteger, "maxinteger + 1")
end)

T.finish()
