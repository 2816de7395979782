-- Lab 03: autograd through all_reduce.
--
-- What it shows: a collective inside a model is an op like any other, and its backward is
-- another collective. Which one depends on where the loss lives, and getting it wrong
-- gives gradients that are off by exactly a factor of the world size (or missing the other
-- ranks' share). This is where Megatron's f and g operators come from.
--   scripts/llmlab -n 4 scripts/labs/03_autograd_allreduce.lua
--
-- The derivation. A row-parallel linear layer splits W [in, out] by rows over n ranks and
-- the input X [B, in] by columns: rank r holds X_r [B, in/n] and W_r [in/n, out], and
--     Y = X W = sum_r X_r W_r,
-- so every rank computes its partial product and an all_reduce adds them. Every rank then
-- holds the same Y and computes the same loss L(Y): the loss is replicated, not summed
-- over ranks. The chain rule on rank r gives
--     dL/dW_r = X_r^T dL/dY,     dL/dX_r = dL/dY W_r^T,
-- and dL/dY is already the full gradient on every rank. So the backward of this all_reduce
-- must pass dL/dY through unchanged: all-reduce forward, identity backward (Megatron's g,
-- reduce_from_tensor_model_parallel_region). An all_reduce in backward would add n equal
-- copies and make every gradient n times too large.
--
-- The mirror image is the column-parallel layer: X is replicated and W is split by columns,
-- Y_r = X W_r. The loss depends on every Y_r, so X's gradient has a share from each rank,
--     dL/dX = sum_r dL/dY_r W_r^T,
-- which is an all_reduce in backward of an op that was the identity in forward (Megatron's
-- f, copy_to_tensor_model_parallel_region). f and g are conjugate: each is the other's
-- backward.
--
-- An all_reduce in both directions is right in a third situation: when each rank has its
-- own loss L_r (different data) and the objective is their sum. Then dL/dx_r gathers
-- dL_q/dy from every rank q: an all_reduce of the gradients.

local dist = lab.dist
local rank, n = dist.rank(), dist.world()
local failures = 0

local function report(what, got, want, expect_equal)
  local diff = lab.max_abs_diff(got, want)
  local scale = want:abs():max():item()
  local same = diff <= 1e-5 * math.max(1, scale)
  local ok = same == expect_equal
  local all = lab.tensor({ ok and 0 or 1 }, { dtype = "i32" })
  dist.all_reduce(all)
  if all[1] > 0 then failures = failures + 1 end
  lab.print0(string.format("  %-52s max |diff| %-10.3g %s", what, diff,
    all[1] == 0 and (expect_equal and "matches (ok)" or "differs, as it must (ok)") or "UNEXPECTED"))
end

-- The three operators, written as custom autograd Functions so the collective in each
-- direction is visible. lab.autograd.dist has the same ones built in C.
local AllReduceForwardOnly = lab.autograd.Function { -- Megatron's g
  forward = function(ctx, x) local y = x:clone(); dist.all_reduce(y); return y end,
  backward = function(ctx, grad) return grad end,
}
local AllReduceBackwardOnly = lab.autograd.Function { -- Megatron's f
  forward = function(ctx, x) return x:clone() end,
  backward = function(ctx, grad) local g = grad:clone(); dist.all_reduce(g); return g end,
}
local AllReduceBoth = lab.autograd.Function { -- all_reduce in forward and in backward
  forward = function(ctx, x) local y = x:clone(); dist.all_reduce(y); return y end,
  backward = function(ctx, grad) local g = grad:clone(); dist.all_reduce(g); return g end,
}

-- The same full-size data on every rank (same seed), so each rank can also compute the
-- single-rank reference and compare its own shard of the gradients.
local B, IN, OUT = 4, 8 * n, 6
lab.manual_seed(2024)
local X = lab.randn(B, IN, { dtype = "f64" })
local W = lab.randn(IN, OUT, { dtype = "f64" })
local target = lab.randn(B, OUT, { dtype = "f64" })
local function loss_of(Y) return ((Y - target) ^ 2):mean() end
local shard = IN // n
local lo, hi = rank * shard + 1, (rank + 1) * shard

lab.print0(string.format("== Lab 03: autograd through all_reduce, %d ranks ==", n))
lab.print0("\n1. Single-rank reference: Y = X W, loss = mean((Y - target)^2)")
local Wref = W:clone():requires_grad_()
local Xref = X:clone():requires_grad_()
loss_of(Xref:matmul(Wref)):backward()
lab.print0(string.format("  reference loss computed on every rank; dW is [%d, %d]", IN, OUT))

lab.print0("\n2. Row-parallel layer Y = all_reduce(X_r W_r), loss replicated on every rank:")
lab.print0("   the all-reduce is in the forward; its backward is the identity (g)")
local function row_parallel(op)
  local Wr = W:slice(1, lo, hi):clone():requires_grad_()
  local Xr = X:slice(2, lo, hi):clone():requires_grad_()
  local Y = op(Xr:matmul(Wr))
  local loss = loss_of(Y)
  loss:backward()
  return loss, Wr.grad, Xr.grad
end
local loss_g, dW_g, dX_g = row_parallel(AllReduceForwardOnly)
report("loss equals the reference", loss_g, lab.tensor(loss_of(X:matmul(W)):item(), { dtype = "f64" }), true)
report("g (identity backward): dW_r is the reference's rows", dW_g, Wref.grad:slice(1, lo, hi), true)
report("g (identity backward): dX_r is the reference's columns", dX_g, Xref.grad:slice(2, lo, hi), true)
local _, dW_both = row_parallel(AllReduceBoth)
if n > 1 then
  report("all_reduce in backward too: dW_r is wrong", dW_both, Wref.grad:slice(1, lo, hi), false)
  report(string.format("... by exactly the factor world = %d", n), dW_both, Wref.grad:slice(1, lo, hi) * n, true)
end

lab.print0("\n3. Column-parallel layer Y_r = f(X) W_r, loss over all columns:")
lab.print0("   the forward is the identity on X; the backward needs the all-reduce of dX (f)")
-- W [in, 3n] split by columns: rank r holds 3 of them. The loss of the full Y is the sum of
-- each column block's share, so each rank backpropagates its own share.
local OUTC = 3 * n
lab.manual_seed(7)
local Wc_full = lab.randn(IN, OUTC, { dtype = "f64" })
local target_c = lab.randn(B, OUTC, { dtype = "f64" })
local Xref2 = X:clone():requires_grad_();
(((Xref2:matmul(Wc_full) - target_c) ^ 2):mean()):backward()
local function col_parallel(op)
  local c0, c1 = 3 * rank + 1, 3 * rank + 3
  local Wc = Wc_full:slice(2, c0, c1):clone():requires_grad_()
  local Xc = X:clone():requires_grad_()
  local Yr = op(Xc):matmul(Wc)
  local share = ((Yr - target_c:slice(2, c0, c1)) ^ 2):sum() / (B * OUTC)
  share:backward()
  return Xc.grad
end
report("f (all_reduce backward): dX is the reference's", col_parallel(AllReduceBackwardOnly), Xref2.grad, true)
if n > 1 then
  local dX_id = col_parallel(function(x) return x * 1 end)
  report("identity backward: dX misses the other ranks' share", dX_id, Xref2.grad, false)
end

lab.print0("\n4. The built-in C versions agree with the Lua Functions")
local x = lab.randn(3, 4, { dtype = "f64" }):requires_grad_()
local y1 = AllReduceForwardOnly(x)
local y2 = lab.autograd.dist.reduce_from_region(x)
report("reduce_from_region forward", y2, y1, true)
local gx = lab.randn(3, 4, { dtype = "f64" })
y1:backward(gx)
local g1 = x.grad:clone()
x.grad = nil
lab.autograd.dist.copy_to_region(x):backward(gx)
local ref = gx:clone()
dist.all_reduce(ref)
report("copy_to_region backward all-reduces", x.grad, ref, true)
report("reduce_from_region backward is the identity", g1, gx, true)

lab.print0("\nIn short: the column-parallel layer needs the backward all-reduce (f: identity forward,")
lab.print0("all-reduce of dX backward); the row-parallel layer needs the forward all-reduce and passes")
lab.print0("the gradient through unchanged (g). The Megatron MLP is column then row: f before, g after.")

if failures > 0 then error(string.format("lab 03: %d check(s) failed", failures), 0) end
lab.print0("\nall checks passed")
