-- all_to_all_single with uneven split sizes (expert parallelism's dispatch): rows reach the
-- right rank in order, the autograd op sends gradients back to the rows' senders, and every
-- mistake (wrong count of splits, sums, dtypes, ranks disagreeing) is a named error.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local dist, D = lab.dist, lab.autograd.dist
local r, n = dist.rank(), dist.world()

-- rank s sends rows(s, d) rows to rank d: uneven, some zero
local function rows(s, d) return (s + 2 * d) % 3 end

-- rank s's input: for each destination d in order, rows(s, d) rows of {100 s + d, k}
local function input_of(s)
  local t, splits = {}, {}
  for d = 0, n - 1 do
    splits[d + 1] = rows(s, d)
    for k = 1, rows(s, d) do t[#t + 1] = { 100 * s + d, k } end
  end
  return t, splits
end

local function expected()
  local t, splits = {}, {}
  for s = 0, n - 1 do
    splits[s + 1] = rows(s, r)
    for k = 1, rows(s, r) do t[#t + 1] = { 100 * s + r, k } end
  end
  return t, splits
end

T.test("uneven rows reach each rank in rank order", function()
  local inl, in_splits = input_of(r)
  local want, out_splits = expected()
  local x = #inl > 0 and lab.tensor(inl, { dtype = "f32" }) or lab.zeros(0, 2)
  local out = lab.zeros(#want, 2)
  dist.all_to_all_single(out, x, { output_split_sizes = out_splits, input_split_sizes = in_splits })
  if #want > 0 then T.values(out, want, 0, "received rows") end
  -- the same through async
  local out2 = lab.zeros(#want, 2)
  local h = dist.all_to_all_single(out2, x, { output_split_sizes = out_splits, input_split_sizes = in_splits, async = true })
  h:wait()
  if #want > 0 then T.values(out2, want, 0, "async received rows") end
  local st = dist.stats().world.all_to_all_single
  T.ok(st and st.calls >= 2, "counted in stats")
end)

T.test("even split without split sizes", function()
  local x = lab.zeros(2 * n, 3)
  for d = 1, n do x[2 * d - 1] = 10 * r + d; x[2 * d] = 10 * r + d end
  local out = lab.zeros(2 * n, 3)
  dist.all_to_all_single(out, x)
  for s = 1, n do T.eq(out[2 * s][1], 10 * (s - 1) + r + 1) end
end)

T.test("autograd: forward exchanges, backward returns each row's gradient to its sender", function()
  local inl, in_splits = input_of(r)
  local _, out_splits = expected()
  local x = (#inl > 0 and lab.tensor(inl, { dtype = "f32" }) or lab.zeros(0, 2)):requires_grad_()
  local y = D.all_to_all_single(x, { output_split_sizes = out_splits, input_split_sizes = in_splits })
  local rows_out = 0
  for _, v in ipairs(out_splits) do rows_out = rows_out + v end
  T.eq(y.shape[1], rows_out, "rows received")
  -- receiver q weights every row it got by (q + 1) and by the row's first value: the
  -- gradient of a row sent to d is (d + 1) * (that value), back on the sender
  ;(y * y:detach() * (r + 1)):sum():backward()
  if #inl > 0 then
    local g, i = x.grad:tolist(), 0
    for d = 0, n - 1 do
      for k = 1, rows(r, d) do
        i = i + 1
        T.eq(g[i][1], (d + 1) * (100 * r + d), "grad of a row sent to " .. d)
        T.eq(g[i][2], (d + 1) * k, "grad col 2")
      end
    end
  end
end)

T.test("mistakes are named errors", function()
  local x, out = lab.zeros(n, 2), lab.zeros(n, 2)
  local ones = {}
  for i = 1, n do ones[i] = 1 end
  T.raises(function() dist.all_to_all_single(out, x, { input_split_sizes = { 1, 2, 3, 4, 5 } }) end,
    "input_split_sizes has 5 entries", "one split per rank")
  local bad = {}
  for i = 1, n do bad[i] = 1 end
  bad[1] = 2
  T.raises(function() dist.all_to_all_single(out, x, { input_split_sizes = bad, output_split_sizes = ones }) end,
    "input_split_sizes sum to " .. (n + 1), "has " .. n .. " rows")
  local neg = {}
  for i = 1, n do neg[i] = 1 end
  neg[1] = -1
  T.raises(function() dist.all_to_all_single(out, x, { input_split_sizes = neg }) end, "non-negative")
  T.raises(function() dist.all_to_all_single(lab.zeros(n, 3), x) end, "same sizes except dim 1")
  T.raises(function() dist.all_to_all_single(lab.zeros(n, 2, { dtype = "f64" }), x) end, "same dtype")
  if n > 1 then
    T.raises(function() dist.all_to_all_single(out, lab.zeros(n + 1, 2)) end, "do not split evenly")
  end
end)

T.test("checked mode: ranks that disagree on the splits fail together, naming both", function()
  if n == 1 then return end
  local was = dist.checked()
  dist.set_checked(true)
  local ones = {}
  for i = 1, n do ones[i] = 1 end
  -- rank 0 expects two rows from rank 1 and none from itself; rank 1 sends it one
  local outs = ones
  if r == 0 then outs = {}; for i = 1, n do outs[i] = 1 end; outs[1] = 0; outs[2] = 2 end
  local x, out = lab.zeros(n, 2), lab.zeros(n, 2)
  local err = T.raises(function()
    dist.all_to_all_single(out, x, { input_split_sizes = ones, output_split_sizes = outs })
  end, "rank 0 sends 1 rows to rank 0", "expects 0 rows from rank 0")
  dist.set_checked(was)
  -- the group is still usable afterwards
  dist.all_to_all_single(out, x)
  T.ok(err ~= nil)
end)

T.finish()
