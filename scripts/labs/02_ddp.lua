-- Lab 02: data parallelism (DDP) from the inside.
--
-- What it shows: the three things DDP does to keep N replicas of a model identical while
-- each trains on different data: (1) broadcast the parameters from rank 0 once, (2)
-- average the gradients with all_reduce after every backward, (3) let every rank take the
-- same optimizer step. It does each by hand for a linear model, printing every rank's
-- view, checks after every step that the replicas are bit-identical, and then shows that
-- lab.ddp.wrap (buckets, overlapped asynchronous all-reduce) produces the same numbers,
-- and finally that both equal one rank training on the whole batch.
--   scripts/llmlab -n 4 scripts/labs/02_ddp.lua
--
-- Why averaging is right: the loss over the global batch of N*B examples is the mean of
-- the N per-rank losses over B examples each, so its gradient is the mean of the per-rank
-- gradients. Averaged gradients + the same starting point + the same update rule = the
-- same model on every rank, equal to one rank training on the whole batch.
local dist = lab.dist
local rank, n = dist.rank(), dist.world()
local failures = 0

local function checksum(model)
  local s = 0
  for _, p in ipairs(model:parameters()) do s = s + p:to("f64"):sum():item() * 1.000001 + p:to("f64"):abs():sum():item() end
  return s
end

-- every rank's checksum equal? (gathered, so each rank can compare them all)
local function replicas_identical(model, what)
  local c = lab.tensor({ checksum(model) }, { dtype = "f64" })
  local all = dist.all_gather(c)
  local same = true
  for _, t in ipairs(all) do same = same and t[1] == all[1][1] end
  if not same then failures = failures + 1 end
  lab.print0(string.format("  replicas identical %-28s %s", what, same and "yes (ok)" or "NO"))
  return same
end

lab.print0(string.format("== Lab 02: DDP by hand and with lab.ddp, %d ranks ==", n))

-- A linear model y = x W^T + b. Each rank starts from a different random init on purpose.
lab.manual_seed(1000 + rank)
local model = lab.nn.Linear(4, 2)
lab.print0("\n1. Before the broadcast each rank has its own random init:")
dist.print_ranks(string.format("weight[1][1] = %+.5f", model.weight[1][1]))
lab.no_grad(function()
  for _, p in ipairs(model:parameters()) do dist.broadcast(p, 0) end
end)
lab.print0("   after broadcasting every parameter from rank 0:")
dist.print_ranks(string.format("weight[1][1] = %+.5f", model.weight[1][1]))
replicas_identical(model, "after the broadcast:")

-- The data: a fixed global batch of 4n examples of y = x A + noise; rank r gets rows
-- 4r+1..4r+4. lab.seed_per_rank would give each rank its own stream instead.
lab.manual_seed(7)
local A = lab.randn(4, 2)
local X = lab.randn(4 * n, 4)
local Y = X:matmul(A) + lab.randn(4 * n, 2) * 0.01
local Xr, Yr = X:slice(1, 4 * rank + 1, 4 * rank + 4), Y:slice(1, 4 * rank + 1, 4 * rank + 4)
local opt = lab.optim.SGD(model:parameters(), { lr = 0.1 })

local manual_losses = {}
for step = 1, 5 do
  lab.print0(string.format("\n2.%d step %d", step, step))
  opt:zero_grad()
  local loss = ((model(Xr) - Yr) ^ 2):mean()
  loss:backward()
  if step == 1 then
    lab.print0("   local gradients differ (different data on each rank):")
    dist.print_ranks(string.format("grad weight[1][1] = %+.5f", model.weight.grad[1][1]))
  end
  -- gradient sync: the average over ranks
  for _, p in ipairs(model:parameters()) do dist.all_reduce(p.grad, "avg") end
  if step == 1 then
    lab.print0("   after all_reduce(avg) of every gradient they are equal:")
    dist.print_ranks(string.format("grad weight[1][1] = %+.5f", model.weight.grad[1][1]))
  end
  opt:step() -- the same update on every rank
  local global = loss:detach():clone()
  dist.all_reduce(global, "avg")
  manual_losses[step] = global:item()
  lab.print0(string.format("   global loss %.6f", global:item()))
  replicas_identical(model, "after the optimizer step:")
end

lab.print0("\n3. The same training with lab.ddp.wrap (broadcast, bucketed async all-reduce in backward)")
lab.manual_seed(1000 + rank)
local wrapped = lab.ddp.wrap(lab.nn.Linear(4, 2))
local opt2 = lab.optim.SGD(wrapped:parameters(), { lr = 0.1 })
for step = 1, 5 do
  opt2:zero_grad()
  local loss = ((wrapped(Xr) - Yr) ^ 2):mean()
  loss:backward() -- the gradients are averaged before backward returns
  opt2:step()
  local global = loss:detach():clone()
  dist.all_reduce(global, "avg")
  local same = math.abs(global:item() - manual_losses[step]) <= 1e-6 * math.abs(manual_losses[step])
  if not same then failures = failures + 1 end
  lab.print0(string.format("   step %d: global loss %.6f, by hand %.6f %s", step, global:item(), manual_losses[step],
    same and "(ok)" or "DIFFERENT"))
end
replicas_identical(wrapped.module, "with lab.ddp:")
lab.print0("   gradient buckets: " .. #wrapped.buckets .. ", all_reduce calls this run: " ..
  dist.stats().world.all_reduce.calls)

-- 4. The claim itself: DDP on n ranks with B examples each is one rank training on the
-- whole batch of n*B. Every rank trains that single-rank model too (rank 0's initial
-- weights, all 4n rows, the same SGD) and compares every parameter and every loss.
lab.print0(string.format("\n4. One rank with the whole batch of %d rows, the same 5 steps:", 4 * n))
lab.manual_seed(1000) -- rank 0's initial weights, the ones the broadcast gave everybody
local single = lab.nn.Linear(4, 2)
local opt3 = lab.optim.SGD(single:parameters(), { lr = 0.1 })
local worst_loss = 0
for step = 1, 5 do
  opt3:zero_grad()
  local loss = ((single(X) - Y) ^ 2):mean()
  loss:backward()
  opt3:step()
  worst_loss = math.max(worst_loss, math.abs(loss:item() - manual_losses[step]) / math.abs(manual_losses[step]))
end
local function worst_param(m) -- over every named parameter (a list in registration order)
  local theirs, worst = {}, 0
  for _, np in ipairs(m:named_parameters()) do theirs[np[1]] = np[2] end
  local mine = single:named_parameters()
  for _, np in ipairs(mine) do
    local got = assert(theirs[np[1]], "no parameter " .. np[1])
    worst = math.max(worst, lab.max_abs_diff(got, np[2]) / math.max(1e-12, np[2]:abs():max():item()))
  end
  return worst, #mine
end
local w_hand, count = worst_param(model)
local w_ddp = worst_param(wrapped.module)
for _, c in ipairs({ { "losses, by hand vs one rank", worst_loss }, { "every parameter, by hand vs one rank", w_hand },
  { "every parameter, lab.ddp vs one rank", w_ddp } }) do
  local t = lab.tensor({ c[2] }, { dtype = "f64" })
  dist.all_reduce(t, { op = "max" })
  local same = t[1] <= 1e-5
  if not same then failures = failures + 1 end
  lab.print0(string.format("   %-40s largest relative difference %.1e %s", c[1], t[1], same and "(ok)" or "TOO LARGE"))
end
lab.print0(string.format("   (%d parameter tensors, every element; float32 sums in another order differ in the last bits)",
  count))

if failures > 0 then error(string.format("lab 02: %d check(s) failed", failures), 0) end
lab.print0("\nall checks passed")
