-- Lab 04: tensor parallelism, one linear layer at a time.
--
-- What it shows: the two ways to split a linear layer Y = X W^T over p ranks, the
-- collective each needs, and the Megatron FFN that chains them with a single all-reduce;
-- for each it derives the communication, checks the calls and payload that lab.dist.stats()
-- counted as the layer ran against it, and checks the output against the unsplit layer.
-- What crosses the wire per rank is the payload times the ring algorithm's factor: a
-- formula (stats() reports it as wire_bytes), not a measurement of the network.
--   scripts/llmlab -n 4 scripts/labs/04_tensor_parallel.lua
--
-- Notation: X is [b, s, h] (batch, sequence, hidden), fp32 (4 bytes), p ranks.
-- 1. Column parallel: W [4h, h] split by output rows, rank r computes Y_r = X W_r^T, a
--    [b, s, 4h/p] slice of the columns. To have all of Y on every rank: all-gather. Each
--    rank receives the other p-1 slices: (p-1)/p * b*s*4h elements over the wire.
-- 2. Row parallel: W [h, 4h] split by input columns; X arrives split the same way
--    ([b, s, 4h/p] per rank); rank r computes X_r W_r^T, a partial sum of the full
--    [b, s, h] result: all-reduce, 2(p-1)/p * b*s*h elements over the wire with a ring.
-- 3. The Megatron FFN: column (no gather) -> GELU -> row. The activations between the two
--    stay split (GELU is elementwise), so the only collective is the row layer's
--    all-reduce of b*s*h forward, and the column layer's all-reduce of dX (b*s*h) backward.
local dist = lab.dist
local rank, p = dist.rank(), dist.world()
local grid = dist.grid { tp = p }
local b, s, h = 2, 16, 8 * p
local F32 = 4

local check, finish = lab.checker(62)

-- the traffic of the TP group since the last reset, by op
local function tp_traffic()
  local st = dist.stats()
  for name, ops in pairs(st) do if name ~= "world" then return ops end end
  return {}
end

local function fmt(bytes) return lab.format_bytes(bytes) end

lab.print0(string.format("== Lab 04: tensor parallelism on %d ranks, X = [%d, %d, %d] f32 ==", p, b, s, h))
lab.manual_seed(0)
local X = lab.randn(b, s, h)

lab.print0("\n1. Column parallel + all-gather: Y = X W^T, W [4h, h] split by rows")
lab.manual_seed(1)
local full_up = lab.nn.Linear(h, 4 * h)
local col = lab.tp.ColumnParallelLinear(h, 4 * h, { from = full_up, gather_output = true, group = grid.tp_group })
dist.reset_stats()
local Y = lab.no_grad(function() return col(X) end)
local t = tp_traffic()
local ag = t.all_gather or { calls = 0, bytes = 0, wire_bytes = 0 }
local payload = b * s * 4 * h * F32
lab.print0(string.format("  each rank holds W_r [%d, %d] and computes Y_r [%d, %d, %d]", 4 * h // p, h, b, s, 4 * h // p))
lab.print0(string.format("  counted: %d all_gather of %s (derived: one, of Y = b*s*4h floats = %s)", ag.calls, fmt(ag.bytes),
  fmt(payload)))
lab.print0(string.format("  wire bytes per rank under a ring, (p-1)/p of Y (formula): %s", fmt(ag.wire_bytes)))
check("output equals the unsplit layer", lab.allclose(Y, full_up(X), 1e-5, 1e-6))
check("one all-gather of b*s*4h floats, as derived", ag.calls == 1 and ag.bytes == payload)

lab.print0("\n2. Row parallel + all-reduce: Z = A W^T, W [h, 4h] split by columns, A arrives split")
lab.manual_seed(2)
local full_down = lab.nn.Linear(4 * h, h)
local row = lab.tp.RowParallelLinear(4 * h, h, { from = full_down, input_is_parallel = true, group = grid.tp_group })
local A = lab.randn(b, s, 4 * h)
local A_r = A:slice(3, rank * 4 * h // p + 1, (rank + 1) * 4 * h // p)
dist.reset_stats()
local Z = lab.no_grad(function() return row(A_r) end)
t = tp_traffic()
local ar = t.all_reduce or { calls = 0, bytes = 0, wire_bytes = 0 }
payload = b * s * h * F32
lab.print0(string.format("  each rank computes a partial sum [%d, %d, %d] from A_r [%d, %d, %d]", b, s, h, b, s, 4 * h // p))
lab.print0(string.format("  counted: %d all_reduce of %s (derived: one, of Z = b*s*h floats = %s)", ar.calls, fmt(ar.bytes),
  fmt(payload)))
lab.print0(string.format("  wire bytes per rank under a ring, 2(p-1)/p of Z (formula): %s", fmt(ar.wire_bytes)))
check("output equals the unsplit layer", lab.allclose(Z, full_down(A), 1e-5, 1e-5))
check("one all-reduce of b*s*h floats, as derived", ar.calls == 1 and ar.bytes == payload)

lab.print0("\n3. The Megatron FFN: column -> GELU -> row, one all-reduce each way")
lab.manual_seed(3)
local full_mlp = lab.nn.MLP({ d_model = h })
local mlp = lab.tp.ParallelMLP(h, 4 * h, { from = full_mlp, group = grid.tp_group })
local Xa, Xb = X:clone():requires_grad_(), X:clone():requires_grad_()
dist.reset_stats()
local out = mlp(Xb)
local fwd = tp_traffic()
local ref = full_mlp(Xa)
check("forward output equals the unsplit FFN", lab.allclose(out, ref, 1e-5, 1e-6))
local G = lab.randn(b, s, h)
ref:backward(G)
dist.reset_stats()
out:backward(G)
local bwd = tp_traffic()
payload = b * s * h * F32
lab.print0(string.format("  forward : %d all_reduce of %s (b*s*h floats = %s)", fwd.all_reduce and fwd.all_reduce.calls or 0,
  fmt(fwd.all_reduce and fwd.all_reduce.bytes or 0), fmt(payload)))
lab.print0(string.format("  backward: %d all_reduce of %s (dX, b*s*h floats)", bwd.all_reduce and bwd.all_reduce.calls or 0,
  fmt(bwd.all_reduce and bwd.all_reduce.bytes or 0)))
check("one all-reduce of b*s*h forward", fwd.all_reduce and fwd.all_reduce.calls == 1 and fwd.all_reduce.bytes == payload)
check("one all-reduce of b*s*h backward", bwd.all_reduce and bwd.all_reduce.calls == 1 and bwd.all_reduce.bytes == payload)
check("input gradient equals the unsplit FFN's", lab.allclose(Xb.grad, Xa.grad, 1e-5, 1e-6))
local lo = rank * 4 * h // p + 1
check("each rank's fc gradient is its rows of the full one",
  lab.allclose(mlp.fc.weight.grad, full_mlp.fc.weight.grad:slice(1, lo, lo + 4 * h // p - 1), 1e-5, 1e-6))

finish("lab 04")
