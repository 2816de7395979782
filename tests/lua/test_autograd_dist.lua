-- Differentiable collectives at any world size: forward values and backward gradients
-- against closed forms (every rank builds the same global tensors from one seed).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local D = lab.autograd.dist
local r, n = lab.dist.rank(), lab.dist.world()

T.test("all_reduce: forward sums, backward sums the gradients", function()
  local x = lab.full({ 3 }, r + 1.0):requires_grad_()
  local y = D.all_reduce(x)
  T.eq(y[1], n * (n + 1) / 2)
  -- each rank's loss weights y by (rank + 1): dL_total/dx = sum_q (q + 1)
  ;(y * (r + 1)):sum():backward()
  T.values(x.grad, { n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2 })
end)

T.test("all_gather along a dim and its reduce_scatter backward", function()
  local x = lab.full({ 2, 3 }, r * 1.0):requires_grad_()
  local y = D.all_gather(x, { dim = 2 }) -- [2, 3n]
  T.eq(y.shape[2], 3 * n)
  T.eq(y[1][3 * n], n - 1)
  -- rank q weights column block b by (q + 1): x_b's gradient sums (q + 1) over ranks
  ;(y * (r + 1)):sum():backward()
  T.values(x.grad[1], { n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2 })
end)

T.test("reduce_scatter and its all_gather backward", function()
  local x = lab.ones(2 * n, 2):requires_grad_()
  local y = D.reduce_scatter(x, { dim = 1 }) -- [2, 2], each element n
  T.eq(y.shape[1], 2)
  T.eq(y[1][1], n)
  local w = lab.full({ 2, 2 }, r + 1.0)
  ;(y * w):sum():backward()
  -- block q of x gets rank q's weight (q + 1)
  T.eq(x.grad[1][1], 1)
  T.eq(x.grad[2 * n][1], n)
end)

T.test("scatter_to_region and gather_from_region are a pair", function()
  local x = lab.arange(4 * n, { dtype = "f32" }):view(1, 4 * n):requires_grad_()
  local mine = D.scatter_to_region(x) -- my 4 columns
  T.eq(mine[1][1], 4 * r)
  local back = D.gather_from_region(mine)
  T.eq(lab.max_abs_diff(back, x), 0)
  back:sum():backward()
  -- gather's backward keeps this rank's slice of the ones; scatter's backward all-gathers
  -- the slices again: every element of x gets 1
  T.eq(x.grad:sum():item(), 4 * n)
  T.eq(x.grad:min():item(), 1)
  if n > 1 then T.raises(function() D.scatter_to_region(lab.ones(1, 4 * n + 1)) end, "split evenly") end
end)

T.finish()
