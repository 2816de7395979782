-- Tensor parallelism at TP = world size (1, 2, 4): every layer and the whole GPT against
-- the unsharded model built from the same seed (outputs and gradients, f32, rel. 1e-5 with
-- a small absolute floor), the communication each layer does, sequence parallelism, the
-- RNG tracker, and TP combined with DDP.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r, n = lab.dist.rank(), lab.dist.world()
local grid = lab.dist.grid { tp = n }
local G = { group = grid.tp_group }
local RT, AT = 1e-5, 1e-6

local function close(a, b, what) T.ok(lab.allclose(a, b, RT, AT), string.format("%s (max |diff| %.3g)", what, lab.max_abs_diff(a, b))) end

-- my slice of a full tensor along dim
local function shard(t, dim, p, k)
  local len = t.shape[dim] // p
  return t:slice(dim, k * len + 1, (k + 1) * len)
end

T.test("ColumnParallelLinear, gathered and not", function()
  lab.manual_seed(1)
  local full = lab.nn.Linear(8, 4 * n)
  local col = lab.tp.ColumnParallelLinear(8, 4 * n, { from = full, gather_output = true, group = grid.tp_group })
  local x = lab.randn(3, 5, 8)
  local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
  local y_ref, y = full(xa), col(xb)
  close(y, y_ref, "gathered output")
  local gy = lab.randn(3, 5, 4 * n)
  y_ref:backward(gy)
  y:backward(gy)
  close(xb.grad, xa.grad, "input gradient (all-reduced by f)")
  close(col.weight.grad, shard(full.weight.grad, 1, n, r), "weight gradient is the full one's rows")
  close(col.bias.grad, shard(full.bias.grad, 1, n, r), "bias gradient")
  local split = lab.tp.ColumnParallelLinear(8, 4 * n, { from = full, gather_output = false, group = grid.tp_group })
  close(split(x), shard(full(x), 3, n, r), "ungathered output is my columns")
end)

T.test("RowParallelLinear, split input and not", function()
  lab.manual_seed(2)
  local full = lab.nn.Linear(4 * n, 6)
  local x = lab.randn(2, 3, 4 * n)
  local row = lab.tp.RowParallelLinear(4 * n, 6, { from = full, input_is_parallel = false, group = grid.tp_group })
  local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
  local y_ref, y = full(xa), row(xb)
  close(y, y_ref, "output (all-reduced by g)")
  local gy = lab.randn(2, 3, 6)
  y_ref:backward(gy)
  y:backward(gy)
  close(xb.grad, xa.grad, "input gradient (all-gathered by the scatter's backward)")
  close(row.weight.grad, shard(full.weight.grad, 2, n, r), "weight gradient is the full one's columns")
  close(row.bias.grad, full.bias.grad, "bias gradient")
end)

T.test("ParallelMLP: one all-reduce of b*s*h forward and one backward", function()
  lab.manual_seed(3)
  local cfg = { d_model = 16 }
  local full = lab.nn.MLP(cfg)
  local mlp = lab.tp.ParallelMLP(16, 64, { from = full, group = grid.tp_group })
  local x = lab.randn(2, 5, 16)
  local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
  local y = mlp(xb)
  local y_ref = full(xa)
  close(y, y_ref, "output")
  local gy = lab.randn(2, 5, 16)
  y_ref:backward(gy)
  y:backward(gy)
  close(xb.grad, xa.grad, "input gradient")
  close(mlp.fc.weight.grad, shard(full.fc.weight.grad, 1, n, r), "fc weight gradient")
  close(mlp.proj.weight.grad, shard(full.proj.weight.grad, 2, n, r), "proj weight gradient")
end)

T.test("ParallelMLP communication equals the write-up", function()
  lab.manual_seed(3)
  local mlp = lab.tp.ParallelMLP(16, 64, { from = lab.nn.MLP({ d_model = 16 }), group = grid.tp_group })
  local x = lab.randn(2, 5, 16):requires_grad_()
  local function tp_stats()
    local s = lab.dist.stats()
    for name, ops in pairs(s) do
      if name ~= "world" then return ops end
    end
    return {}
  end
  lab.dist.reset_stats()
  local y = mlp(x)
  local f = tp_stats()
  local bsh = 2 * 5 * 16 * 4 -- bytes of one [b, s, h] f32 activation
  T.eq(f.all_reduce and f.all_reduce.calls or 0, 1, "forward: one all-reduce")
  T.eq(f.all_reduce and f.all_reduce.bytes or 0, bsh, "of b*s*h elements")
  lab.dist.reset_stats()
  y:backward(lab.ones(2, 5, 16))
  local b = tp_stats()
  T.eq(b.all_reduce and b.all_reduce.calls or 0, 1, "backward: one all-reduce")
  T.eq(b.all_reduce and b.all_reduce.bytes or 0, bsh, "of b*s*h elements")
end)

T.test("ParallelAttention by heads, and the all-gather variant", function()
  lab.manual_seed(4)
  local cfg = { d_model = 8 * n, n_head = 2 * n }
  local full = lab.nn.CausalSelfAttention(cfg)
  local x = lab.randn(2, 6, 8 * n)
  for _, gather in ipairs({ false, true }) do
    local att = lab.tp.ParallelAttention(cfg, { from = full, group = grid.tp_group, gather_heads = gather })
    local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
    full:zero_grad()
    local y_ref, y = full(xa), att(xb)
    close(y, y_ref, "output, gather_heads=" .. tostring(gather))
    local gy = lab.randn(2, 6, 8 * n)
    y_ref:backward(gy)
    y:backward(gy)
    close(xb.grad, xa.grad, "input gradient, gather_heads=" .. tostring(gather))
  end
end)

T.test("VocabParallelEmbedding and vocab-parallel cross-entropy", function()
  lab.manual_seed(5)
  local V = 8 * n
  local full = lab.nn.Embedding(V, 6)
  local emb = lab.tp.VocabParallelEmbedding(V, 6, { from = full, group = grid.tp_group })
  local ids = lab.randint(0, V, { 3, 4 })
  close(emb(ids), full(ids), "embedding")
  local logits = lab.randn(3, 4, V)
  local tg = lab.randint(0, V, { 3, 4 })
  local la = logits:clone():requires_grad_()
  local lb = shard(logits, 3, n, r):clone():requires_grad_()
  local ref = lab.cross_entropy(la, tg)
  local got = lab.tp.vocab_parallel_cross_entropy(lb, tg, grid.tp_group)
  T.near(got:item(), ref:item(), 1e-5, "loss")
  ref:backward()
  got:backward()
  close(lb.grad, shard(la.grad, 3, n, r), "logit gradients are my columns of the full ones")
end)

local cfg = { vocab = 16 * n, d_model = 8 * n, n_layer = 2, n_head = 2 * n, seq_len = 8, tied = false }

local function gpt_pair(sequence_parallel)
  lab.manual_seed(7)
  local full = lab.nn.GPT(cfg)
  lab.manual_seed(7)
  local tpm = lab.tp.GPT(cfg, { group = grid.tp_group, sequence_parallel = sequence_parallel })
  return full, tpm
end

for _, sp in ipairs({ false, true }) do
  T.test("the whole GPT: losses and gradients equal TP=1" .. (sp and ", sequence parallel" or ""), function()
    local full, tpm = gpt_pair(sp)
    lab.manual_seed(8)
    local ids = lab.randint(0, cfg.vocab, { 2, 8 })
    local _, l_ref = full(ids, ids)
    local _, l = tpm(ids, ids)
    T.near(l:item(), l_ref:item(), 1e-5, "loss")
    l_ref:backward()
    l:backward()
    close(tpm.blocks:at(1).ln1.weight.grad, full.blocks:at(1).ln1.weight.grad, "replicated LayerNorm gradient")
    close(tpm.blocks:at(2).mlp.fc.weight.grad, shard(full.blocks:at(2).mlp.fc.weight.grad, 1, n, r), "MLP fc gradient")
    close(tpm.head.weight.grad, shard(full.head.weight.grad, 1, n, r), "head gradient")
    close(tpm.wte.weight.grad, shard(full.wte.weight.grad, 1, n, r), "embedding gradient")
    close(tpm.wpe.weight.grad, full.wpe.weight.grad, "position embedding gradient")
  end)
end

T.test("RNG tracker: dropout equal outside TP regions, different inside", function()
  local tr = lab.tp.rng_tracker(grid, 42)
  lab.manual_seed(42)
  local outside = lab.dropout(lab.ones(64), 0.5, true)
  local inside = tr:fork(function() return lab.dropout(lab.ones(64), 0.5, true) end)
  local all_out = lab.dist.all_gather(outside, { group = grid.tp_group })
  local all_in = lab.dist.all_gather(inside, { group = grid.tp_group })
  for k = 2, n do
    T.eq(lab.max_abs_diff(all_out[k], all_out[1]), 0, "same mask outside")
    T.ok(lab.max_abs_diff(all_in[k], all_in[1]) > 0, "different mask inside")
  end
end)

T.test("TP x DP (tp = 2 when possible) trains the GPT with the losses of one rank", function()
  local t = n >= 2 and 2 or 1
  local g2 = lab.dist.grid { tp = t, dp = n // t }
  local c = { vocab = 32, d_model = 16, n_layer = 2, n_head = 4, seq_len = 8, tied = false }
  local B = 2
  lab.manual_seed(11)
  local ids = lab.randint(0, c.vocab, { B * g2.dp, 8 })
  lab.manual_seed(7)
  local full = lab.nn.GPT(c)
  local opt_ref = lab.optim.AdamW(full:parameters(), { lr = 1e-3 })
  lab.manual_seed(7)
  local model = lab.ddp.wrap(lab.tp.GPT(c, { group = g2.tp_group }), { group = g2.dp_group })
  local opt = lab.optim.AdamW(model:parameters(), { lr = 1e-3 })
  local mine = ids:slice(1, g2.dp_rank * B + 1, (g2.dp_rank + 1) * B)
  for step = 1, 3 do
    opt_ref:zero_grad()
    local _, l_ref = full(ids, ids)
    l_ref:backward()
    opt_ref:step()
    opt:zero_grad()
    local _, l = model(mine, mine)
    l:backward()
    opt:step()
    local avg = l:detach():clone()
    lab.dist.all_reduce(avg, { op = "avg", group = g2.dp_group })
    T.near(avg:item(), l_ref:item(), 1e-5, "loss of step " .. step)
  end
end)

T.finish()
