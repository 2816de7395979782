-- Tensor parallelism at TP = world size (1, 2, 4): every layer and the whole GPT against
-- the unsharded model built from the same seed (outputs, and every parameter's gradient and
-- value after SGD steps through tests/lua/equivalence.lua; f32, rel. 1e-5 with a small
-- absolute floor), with and without sequence parallelism, with accumulation and clipping,
-- under bf16 mixed precision, the communication each layer does, the RNG tracker, and TP
-- combined with DDP.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local E = require("equivalence")
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
  local full = T.place(lab.nn.Linear(8, 4 * n))
  local col = T.place(lab.tp.ColumnParallelLinear(8, 4 * n, { from = full, gather_output = true, group = grid.tp_group }))
  local x = T.place(lab.randn(3, 5, 8))
  local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
  local y_ref, y = full(xa), col(xb)
  close(y, y_ref, "gathered output")
  local gy = T.place(lab.randn(3, 5, 4 * n))
  y_ref:backward(gy)
  y:backward(gy)
  close(xb.grad, xa.grad, "input gradient (all-reduced by f)")
  E.check(T, "ColumnParallelLinear", E.entries(col, { group = grid.tp_group }), full) -- rows reassembled
  local split = T.place(lab.tp.ColumnParallelLinear(8, 4 * n, { from = full, gather_output = false, group = grid.tp_group }))
  close(split(x), shard(full(x), 3, n, r), "ungathered output is my columns")
end)

T.test("RowParallelLinear, split input and not", function()
  lab.manual_seed(2)
  local full = T.place(lab.nn.Linear(4 * n, 6))
  local x = T.place(lab.randn(2, 3, 4 * n))
  local row = T.place(lab.tp.RowParallelLinear(4 * n, 6, { from = full, input_is_parallel = false, group = grid.tp_group }))
  local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
  local y_ref, y = full(xa), row(xb)
  close(y, y_ref, "output (all-reduced by g)")
  local gy = T.place(lab.randn(2, 3, 6))
  y_ref:backward(gy)
  y:backward(gy)
  close(xb.grad, xa.grad, "input gradient (all-gathered by the scatter's backward)")
  E.check(T, "RowParallelLinear", E.entries(row, { group = grid.tp_group }), full) -- columns reassembled
end)

T.test("ParallelMLP: one all-reduce of b*s*h forward and one backward", function()
  lab.manual_seed(3)
  local cfg = { d_model = 16 }
  local full = T.place(lab.nn.MLP(cfg))
  local mlp = T.place(lab.tp.ParallelMLP(16, 64, { from = full, group = grid.tp_group }))
  local x = T.place(lab.randn(2, 5, 16))
  local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
  local y = mlp(xb)
  local y_ref = full(xa)
  close(y, y_ref, "output")
  local gy = T.place(lab.randn(2, 5, 16))
  y_ref:backward(gy)
  y:backward(gy)
  close(xb.grad, xa.grad, "input gradient")
  E.check(T, "ParallelMLP", E.entries(mlp, { group = grid.tp_group }), full)
end)

T.test("a sequence-parallel MLP on its own: every gradient equals the full one's", function()
  lab.manual_seed(3)
  local full = T.place(lab.nn.MLP({ d_model = 16 }))
  local mlp = T.place(lab.tp.ParallelMLP(16, 64, { from = full, group = grid.tp_group, sequence_parallel = true }))
  local x, gy = T.place(lab.randn(2, 4 * n, 16)), T.place(lab.randn(2, 4 * n, 16))
  local y_ref = full(x)
  local y = mlp(shard(x, 2, n, r)) -- this rank's positions in, this rank's positions out
  close(y, shard(y_ref, 2, n, r), "output: my positions")
  y_ref:backward(gy)
  y:backward(shard(gy, 2, n, r))
  E.check(T, "sequence-parallel MLP", E.entries(mlp, { group = grid.tp_group }), full)
end)

T.test("ParallelMLP communication equals the write-up", function()
  lab.manual_seed(3)
  local mlp = T.place(lab.tp.ParallelMLP(16, 64, { from = lab.nn.MLP({ d_model = 16 }), group = grid.tp_group }))
  local x = T.place(lab.randn(2, 5, 16)):requires_grad_()
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
  y:backward(T.place(lab.ones(2, 5, 16)))
  local b = tp_stats()
  T.eq(b.all_reduce and b.all_reduce.calls or 0, 1, "backward: one all-reduce")
  T.eq(b.all_reduce and b.all_reduce.bytes or 0, bsh, "of b*s*h elements")
end)

T.test("ParallelAttention by heads, and the all-gather variant", function()
  lab.manual_seed(4)
  local cfg = { d_model = 8 * n, n_head = 2 * n }
  local full = T.place(lab.nn.CausalSelfAttention(cfg))
  local x = T.place(lab.randn(2, 6, 8 * n))
  for _, gather in ipairs({ false, true }) do
    local att = T.place(lab.tp.ParallelAttention(cfg, { from = full, group = grid.tp_group, gather_heads = gather }))
    local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
    full:zero_grad()
    local y_ref, y = full(xa), att(xb)
    close(y, y_ref, "output, gather_heads=" .. tostring(gather))
    local gy = T.place(lab.randn(2, 6, 8 * n))
    y_ref:backward(gy)
    y:backward(gy)
    close(xb.grad, xa.grad, "input gradient, gather_heads=" .. tostring(gather))
    -- every parameter (with gather_heads the output projection is the full model's own
    -- module, whose gradient both backwards accumulate: only the split ones are compared)
    E.check(T, "ParallelAttention", E.entries(att, { group = grid.tp_group, rename = function(name)
      if gather and name:match("^proj") then return nil end
      return (name:gsub("^qkv_", "qkv."))
    end }), full, { skip = gather and { ["proj.weight"] = true, ["proj.bias"] = true } or nil })
  end
end)

T.test("VocabParallelEmbedding and vocab-parallel cross-entropy", function()
  lab.manual_seed(5)
  local V = 8 * n
  local full = T.place(lab.nn.Embedding(V, 6))
  local emb = T.place(lab.tp.VocabParallelEmbedding(V, 6, { from = full, group = grid.tp_group }))
  local ids = T.place(lab.randint(0, V, { 3, 4 }))
  close(emb(ids), full(ids), "embedding")
  local logits = T.place(lab.randn(3, 4, V))
  local tg = T.place(lab.randint(0, V, { 3, 4 }))
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

-- the TP model's names for the reference's (attention keeps q, k, v in one tensor pair)
local function rename(name)
  return (name:gsub("attn%.qkv_weight$", "attn.qkv.weight"):gsub("attn%.qkv_bias$", "attn.qkv.bias"))
end

-- Trains the reference on the whole batch and the parallel model on its share for `steps`
-- SGD steps; with accum, each step is two half-batches (loss halved each); with clip, the
-- global gradient norm is clipped (over the tensor-parallel group for the parallel model).
-- Every parameter's gradient is compared after the last backward, every value after the
-- last step. ids_of(k, whole) gives micro-batch k of the whole batch or of this rank's.
local function train_and_compare(label, ref, model, opts)
  local inner = model.module or model
  local ropt = lab.optim.SGD(ref:parameters(), { lr = 0.5 })
  local popt = lab.optim.SGD(inner:parameters(), { lr = 0.5 })
  local parts = opts.accum and 2 or 1
  for step = 1, opts.steps or 2 do
    ropt:zero_grad()
    popt:zero_grad()
    for k = 1, parts do
      local ids = opts.ids_of(step, k, parts, true)
      local _, l_ref = ref(ids, ids);
      (l_ref / parts):backward()
      local mine = opts.ids_of(step, k, parts, false)
      local function run()
        local _, l = model(mine, mine);
        (l / parts):backward()
      end
      if k < parts and model.no_sync then model:no_sync(run) else run() end
    end
    if step == (opts.steps or 2) then
      E.check(T, label .. ", gradients of step " .. step, E.entries(inner, { group = opts.tp_group, rename = rename }),
        ref, { values = false })
    end
    if opts.clip then
      local nr = lab.optim.clip_grad_norm(ref:parameters(), opts.clip)
      local np = lab.optim.clip_grad_norm(inner:parameters(), opts.clip, { group = opts.tp_group })
      T.near(np, nr, 1e-5, label .. ": the global gradient norm over the TP group")
      T.ok(nr > opts.clip, label .. ": clipping is active")
    end
    ropt:step()
    popt:step()
  end
  E.check(T, label .. ", values after the steps", E.entries(inner, { group = opts.tp_group, rename = rename }), ref,
    { grads = false })
end

local function gpt_pair(c, opts)
  lab.manual_seed(7)
  local full = T.place(lab.nn.GPT(c))
  lab.manual_seed(7)
  return full, T.place(lab.tp.GPT(c, opts))
end

for _, sp in ipairs({ false, true }) do
  for _, extra in ipairs({ {}, { accum = true, clip = 0.5 } }) do
    local label = "TP=" .. n .. (sp and " with sequence parallelism" or "") .. (extra.accum and ", accumulation and clipping" or "")
    T.test(label .. ": every parameter's gradient and value equal TP=1", function()
      local full, tpm = gpt_pair(cfg, { group = grid.tp_group, sequence_parallel = sp })
      lab.manual_seed(8)
      local ids = T.place(lab.randint(0, cfg.vocab, { 2 * 2, 8 }))
      train_and_compare(label, full, tpm, { accum = extra.accum, clip = extra.clip, tp_group = grid.tp_group,
        ids_of = function(_, k, parts) return ids:slice(1, (k - 1) * 4 // parts + 1, k * 4 // parts) end })
    end)
  end
end

T.test("TP=" .. n .. " with sequence parallelism under bf16 mixed precision, accumulation and clipping", function()
  local full, tpm = gpt_pair(cfg, { group = grid.tp_group, sequence_parallel = true })
  local function sgd(ps) return lab.optim.SGD(ps, { lr = 0.5 }) end
  local mref = lab.amp.MixedPrecision(full, { dtype = "bf16", optimizer = sgd })
  local mpar = lab.amp.MixedPrecision(tpm, { dtype = "bf16", optimizer = sgd })
  -- both compute in bf16, in different orders: bf16's tolerance (a missing reduction is O(1))
  local tol = { rtol = 3e-2, atol = 3e-3 }
  lab.manual_seed(8)
  local ids = T.place(lab.randint(0, cfg.vocab, { 4, 8 }))
  for step = 1, 2 do
    mref:zero_grad()
    mpar:zero_grad()
    for k = 1, 2 do
      local part = ids:slice(1, 2 * k - 1, 2 * k)
      local _, a = full(part, part)
      mref:backward(a / 2)
      local _, b = tpm(part, part)
      mpar:backward(b / 2)
    end
    if step == 2 then
      E.check(T, "amp sp, gradients", E.entries(tpm, { group = grid.tp_group, rename = rename }), full,
        { values = false, rtol = tol.rtol, atol = tol.atol })
    end
    T.ok(mref:step({ clip = 0.5 }) and mpar:step({ clip = 0.5, group = grid.tp_group }), "steps taken")
    T.near(mpar.grad_norm, mref.grad_norm, tol.rtol, "the gradient norm over the TP group")
    T.ok(mref.grad_norm > 0.5, "clipping is active")
  end
  E.check(T, "amp sp, values", E.entries(tpm, { group = grid.tp_group, rename = rename }), full,
    { grads = false, rtol = tol.rtol, atol = tol.atol })
end)

-- issue 10: the row-parallel output biases (attn.proj.bias, mlp.proj.bias) under sequence
-- parallelism got only their own T/p positions' gradient
T.test("issue 10's sequence-parallel repro: every gradient equals one rank's", function()
  local c = { vocab = 16, d_model = 8, n_layer = 1, n_head = math.max(2, n), seq_len = 4, tied = false }
  local g = lab.dist.grid { tp = n }
  local full, m = gpt_pair(c, { grid = g, sequence_parallel = true })
  lab.manual_seed(3)
  local ids = T.place(lab.randint(0, 16, { 2, 4 }))
  local _, a = full(ids, ids)
  a:backward()
  local _, b = m(ids, ids)
  b:backward()
  E.check(T, "repro", E.entries(m, { group = g.tp_group, rename = rename }), full)
  -- marked when made: the LayerNorms and the row-parallel biases, nothing else
  local marked = {}
  for _, np in ipairs(m:named_parameters()) do
    if np[2].sequence_parallel then marked[#marked + 1] = np[1] end
  end
  T.eq(table.concat(marked, " "), "blocks.1.ln1.weight blocks.1.ln1.bias blocks.1.attn.proj.bias blocks.1.ln2.weight "
    .. "blocks.1.ln2.bias blocks.1.mlp.proj.bias ln_f.weight ln_f.bias", "sequence_parallel parameters")
  T.raises(function() m.ln_f.weight.shape = { 1 } end, "cannot set field 'shape'", "read-only")
  T.raises(function() m.ln_f.weight.clone = 1 end, "cannot set field 'clone'", "method")
  close(m.blocks:at(1).mlp.proj.bias.grad, full.blocks:at(1).mlp.proj.bias.grad, "mlp.proj.bias, the issue's print")
end)

-- the helper must be able to fail: skip one parameter's reduction and it names exactly that one
if n > 1 then
  T.test("the all-parameter check catches one skipped sequence-parallel reduction", function()
    local full, m = gpt_pair(cfg, { group = grid.tp_group, sequence_parallel = true })
    m.blocks:at(2).mlp.proj.bias.sequence_parallel = nil -- as if this reduction were forgotten
    lab.manual_seed(8)
    local ids = T.place(lab.randint(0, cfg.vocab, { 2, 8 }))
    local _, a = full(ids, ids)
    a:backward()
    local _, b = m(ids, ids)
    b:backward()
    local problems = E.diff(E.entries(m, { group = grid.tp_group, rename = rename }), full)
    T.eq(#problems, 1, "one difference: " .. table.concat(problems, "; "))
    T.ok((problems[1] or ""):find("blocks.2.mlp.proj.bias: gradient differs", 1, true), "named: " .. tostring(problems[1]))
  end)
end

T.test("RNG tracker: dropout equal outside TP regions, different inside", function()
  local tr = lab.tp.rng_tracker(grid, 42)
  lab.manual_seed(42)
  local outside = lab.dropout(T.place(lab.ones(64)), 0.5, true)
  local inside = tr:fork(function() return lab.dropout(T.place(lab.ones(64)), 0.5, true) end)
  local all_out = lab.dist.all_gather(outside, { group = grid.tp_group })
  local all_in = lab.dist.all_gather(inside, { group = grid.tp_group })
  for k = 2, n do
    T.eq(lab.max_abs_diff(all_out[k], all_out[1]), 0, "same mask outside")
    T.ok(lab.max_abs_diff(all_in[k], all_in[1]) > 0, "different mask inside")
  end
end)

for _, sp in ipairs({ false, true }) do
  T.test("TP x DP (tp = 2 when possible)" .. (sp and " with sequence parallelism" or "")
    .. ", accumulation and clipping: every parameter equals one rank's", function()
    local t = n >= 2 and 2 or 1
    local g2 = lab.dist.grid { tp = t, dp = n // t }
    local c = { vocab = 32, d_model = 16, n_layer = 2, n_head = 4, seq_len = 8, tied = false }
    local B = 2
    lab.manual_seed(11)
    local ids = T.place(lab.randint(0, c.vocab, { B * g2.dp, 8 }))
    local full, m = gpt_pair(c, { group = g2.tp_group, sequence_parallel = sp })
    local model = lab.ddp.wrap(m, { group = g2.dp_group })
    -- micro-batch k of the whole batch holds micro-batch k of every DP rank's share
    local function ids_of(_, k, parts, whole)
      local rows = {}
      for d = 0, g2.dp - 1 do
        if whole or d == g2.dp_rank then
          local per = B // parts
          rows[#rows + 1] = ids:slice(1, d * B + (k - 1) * per + 1, d * B + k * per)
        end
      end
      return lab.cat(rows, 1)
    end
    train_and_compare(string.format("tp %d x dp %d%s", t, g2.dp, sp and " sp" or ""), full, model,
      { accum = true, clip = 0.5, tp_group = g2.tp_group, ids_of = ids_of })
  end)
end

T.finish()
