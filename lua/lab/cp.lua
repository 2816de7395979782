-- lab.cp: context parallelism. The sequence is split over the ranks of a CP group; every
-- layer but attention works on the rank's own positions alone, and attention needs every
-- key and value of the sequence. Two ways to get them:
--   ring        (Liu et al., ring attention; Megatron CP) K and V blocks travel around the
--               ring: at each of the N steps a rank attends its queries to the block it
--               holds while it already sends that block on and receives the next one
--               (isend/irecv posted before the block's compute, waited after it). The
--               partial results are merged by their log-sum-exp (the online softmax of
--               FlashAttention), so no rank ever holds more than two K/V blocks. Backward
--               runs the ring again; the dK/dV of each block travel with it and arrive home
--               after N steps.
--   allgather   (Llama 3) all-gather K and V, attend locally; simpler, and K/V are much
--               smaller than Q under GQA, but every rank holds the whole sequence's K/V.
-- Causal balance: with a contiguous split rank N-1 attends to the whole prefix and rank 0
-- to almost nothing. The zigzag split gives rank i chunks i and 2N-1-i of 2N, so every
-- rank has the same share of the causal triangle (Megatron CP, Llama 3).
local errors = require("lab.errors")
local cp = {}
local D = lab.autograd.dist

-- 0-based positions of rank r's tokens in a sequence of T over n ranks
function cp.positions(T, n, r, zigzag)
  errors.posint("lab.cp.positions", 1, T, "sequence length")
  errors.posint("lab.cp.positions", 2, n, "ranks")
  errors.arg(math.type(r) == "integer" and r >= 0 and r < n, "lab.cp.positions", 3, "a rank in 0.." .. (n - 1), r)
  if zigzag == nil then zigzag = true end
  local pos = {}
  if zigzag and n > 1 then
    if T % (2 * n) ~= 0 then
      error(string.format("rank %d: cp: sequence of %d does not split into %d zigzag chunks (2 x %d ranks)", lab.dist.rank(), T, 2 * n, n), 0)
    end
    local c = T // (2 * n)
    for _, chunk in ipairs({ r, 2 * n - 1 - r }) do
      for i = 0, c - 1 do pos[#pos + 1] = chunk * c + i end
    end
  else
    if T % n ~= 0 then error(string.format("rank %d: cp: sequence of %d does not split over %d ranks", lab.dist.rank(), T, n), 0) end
    local c = T // n
    for i = 0, c - 1 do pos[#pos + 1] = r * c + i end
  end
  return pos
end

-- this rank's positions of x along dim (differentiable: narrow and cat)
function cp.shard(x, dim, opts)
  errors.tensor("lab.cp.shard", 1, x)
  errors.arg(math.type(dim) == "integer", "lab.cp.shard", 2, "a dimension (integer)", dim)
  errors.opts("lab.cp.shard", 3, opts)
  opts = opts or {}
  errors.group("lab.cp.shard", 3, opts.group, "opts.group: a process group")
  local g = opts.group or lab.dist.world_group()
  local n, r = g:size(), g:rank()
  local T = x.shape[dim]
  local pos = cp.positions(T, n, r, opts.zigzag)
  local c = (opts.zigzag ~= false and n > 1) and T // (2 * n) or T // n
  local parts = {}
  for i = 1, #pos, c do parts[#parts + 1] = x:narrow(dim, pos[i] + 1, c) end
  return #parts == 1 and parts[1] or lab.cat(parts, dim)
end

-- the additive causal mask of queries at qpos against keys at kpos: 0 where the key is at
-- or before the query, -1e30 after; nil when nothing is masked, false when everything is
local function causal_mask(qpos, kpos, device)
  local qmin, qmax, kmin, kmax = math.huge, -math.huge, math.huge, -math.huge
  for _, p in ipairs(qpos) do qmin, qmax = math.min(qmin, p), math.max(qmax, p) end
  for _, p in ipairs(kpos) do kmin, kmax = math.min(kmin, p), math.max(kmax, p) end
  if kmin > qmax then return false end
  if kmax <= qmin then return nil end
  local q = lab.tensor(qpos, { dtype = "f32", device = device }):view(#qpos, 1)
  local k = lab.tensor(kpos, { dtype = "f32", device = device }):view(1, #kpos)
  return k:gt(q):to("f32") * -1e30
end

-- One block of attention: out [B,H,Tq,D] and its log-sum-exp [B,H,Tq,1]. The score block
-- is worked on in place and closed at the end, so a step holds one [Tq x Tk] block at a
-- time (Lua's collector would otherwise keep each step's temporaries until it runs).
local function block_forward(q, k, v, scale, mask)
  local s <close> = q:matmul(k:transpose(3, 4))
  s:mul_(scale)
  if mask then s:add_(mask) end
  local m = s:max(4, true)
  s:sub_(m):exp_()
  local l = s:sum(4, true)
  s:div_(l)
  return s:matmul(v), m + l:log()
end

-- merges two partial results by their log-sum-exp
local function merge(o, lse, o2, lse2)
  if not o then return o2, lse2 end
  local mx = lse:maximum(lse2)
  local new = mx + ((lse - mx):exp() + (lse2 - mx):exp()):log()
  return o * (lse - new):exp() + o2 * (lse2 - new):exp(), new
end

-- gradients of one block given the merged output's lse and dsum = rowsum(dO * O):
-- P = exp(S - lse), dV = P^T dO, dS = P * (dO V^T - dsum), dQ = dS K, dK = dS^T Q (x scale)
local function block_backward(q, k, v, dout, lse, dsum, scale, mask)
  local p <close> = q:matmul(k:transpose(3, 4))
  p:mul_(scale)
  if mask then p:add_(mask) end
  p:sub_(lse):exp_()
  local dv = p:transpose(3, 4):matmul(dout)
  local ds <close> = dout:matmul(v:transpose(3, 4))
  ds:sub_(dsum):mul_(p)
  return ds:matmul(k):mul_(scale), ds:transpose(3, 4):matmul(q):mul_(scale), dv
end

-- The same two steps on the FlashAttention kernels (lab.flash_block, kernels/cpu/flash_attention.c
-- or kernels/cuda), used where the device has a kernel for the dtype: the blocks' T x T scores
-- are never materialised. A block is cut into the CP chunks (c positions each, at multiples of
-- c): a key chunk before a query chunk is fully visible, the same chunk is the causal
-- diagonal (the kernel's mask), a later one is skipped.
local function flash_ok(q)
  local dev = q.device
  if dev:sub(1, 4) == "cuda" then
    return (q.dtype == "bf16" or q.dtype == "f16") and (q.shape[4] == 64 or q.shape[4] == 128)
  end
  return q.dtype == "f32" or q.dtype == "bf16" or q.dtype == "f16"
end

-- the chunks of a block: {at = first index along dim 3, first = its first position}
local function chunks(pos, c)
  local out = {}
  for i = 1, #pos, c do out[#out + 1] = { at = i, first = pos[i] } end
  return out
end

-- out and lse [B,H,Tq,1] of the queries at qpos against one K/V block at kpos
local function flash_block_forward(q, k, v, scale, causal, qpos, kpos, c)
  if not causal then
    local o, l = lab.flash_block(q, k, v, { scale = scale })
    return o, l:unsqueeze(4)
  end
  local outs, lses = {}, {}
  for _, qc in ipairs(chunks(qpos, c)) do
    local qa = q:narrow(3, qc.at, c)
    local o, lse
    for _, kc in ipairs(chunks(kpos, c)) do
      if kc.first <= qc.first then
        local ob, lb = lab.flash_block(qa, k:narrow(3, kc.at, c), v:narrow(3, kc.at, c),
          { scale = scale, causal = kc.first == qc.first })
        o, lse = merge(o, lse, ob, lb:unsqueeze(4))
      end
    end
    if not o then -- this chunk sees no key of the block: weight 0 in the merge
      o = lab.zeros(qa.shape[1], qa.shape[2], c, v.shape[4], { dtype = q.dtype, device = q.device })
      lse = lab.full({ qa.shape[1], qa.shape[2], c, 1 }, -math.huge, { device = q.device })
    end
    outs[#outs + 1], lses[#lses + 1] = o, lse
  end
  return lab.cat(outs, 3), lab.cat(lses, 3)
end

-- dq, dk, dv of one block given the merged out, its lse [B,H,Tq,1] and dout
local function flash_block_backward(q, k, v, out, dout, lse, scale, causal, qpos, kpos, c)
  local l = lse:squeeze(4):to("f32")
  out = out:to(q.dtype)
  if not causal then return lab.flash_block_backward(q, k, v, out, dout, l, { scale = scale }) end
  local dq = lab.zeros_like(q)
  local dk, dv = lab.zeros_like(k), lab.zeros_like(v)
  for _, qc in ipairs(chunks(qpos, c)) do
    for _, kc in ipairs(chunks(kpos, c)) do
      if kc.first <= qc.first then
        local a, b = qc.at, kc.at
        local gq, gk, gv = lab.flash_block_backward(q:narrow(3, a, c), k:narrow(3, b, c), v:narrow(3, b, c),
          out:narrow(3, a, c), dout:narrow(3, a, c), l:narrow(3, a, c), { scale = scale, causal = kc.first == qc.first })
        dq:narrow(3, a, c):add_(gq)
        dk:narrow(3, b, c):add_(gk)
        dv:narrow(3, b, c):add_(gv)
      end
    end
  end
  return dq, dk, dv
end

-- starts sending a to the next rank and receiving b's twin from the previous
local function pass_on(g, a, nxt, prv, tag)
  local got = lab.empty(a.shape, { dtype = a.dtype, device = a.device })
  return got, { lab.dist.isend(a, nxt, { group = g, tag = tag }), lab.dist.irecv(got, prv, { group = g, tag = tag }) }
end
local function wait_all(hs) for _, h in ipairs(hs) do h:wait() end end

cp.timing = { compute = 0, wait = 0 } -- seconds in block compute vs waiting for blocks

-- what both attentions take: q, k, v [B, H, T/N, D] and opts (group, scale); returns opts
-- (or {}), the group, its size and this rank in it, T/N and the scale (1/sqrt(D) unless given)
local function attention_args(fname, q, k, v, opts)
  opts = errors.with_opts(fname, errors.tensor, opts, q, k, v)
  errors.group(fname, 4, opts.group, "opts.group: a process group")
  for i, t in ipairs({ q, k, v }) do
    if t:dim() ~= 4 then
      errors.raise(fname, "%s must be [B, H, T/N, D] (4 dimensions), got shape [%s]", ({ "q", "k", "v" })[i], table.concat(t.shape, ", "))
    end
  end
  errors.arg(opts.scale == nil or type(opts.scale) == "number", fname, 4, "opts.scale: a number", opts.scale)
  local g = opts.group or lab.dist.world_group()
  return opts, g, g:size(), g:rank(), q.shape[3], opts.scale or 1 / math.sqrt(q.shape[4])
end

-- Ring attention: q, k, v [B, H, T/N, D] of this rank (positions from cp.positions);
-- opts: group, causal (true), zigzag (true), scale (1/sqrt(D)), impl ('flash' where the
-- device has the kernel, or 'math'). Returns [B, H, T/N, D].
function cp.ring_attention(q, k, v, opts)
  local g, n, r, Tl, scale
  opts, g, n, r, Tl, scale = attention_args("lab.cp.ring_attention", q, k, v, opts)
  local causal = opts.causal ~= false
  local pos = {}
  for j = 0, n - 1 do pos[j] = cp.positions(Tl * n, n, j, opts.zigzag) end
  local nxt, prv = (r + 1) % n, (r - 1 + n) % n
  local chunk = (opts.zigzag ~= false and n > 1) and Tl // 2 or Tl -- positions per CP chunk
  local flash = flash_ok(q) and opts.impl ~= "math" -- opts.impl = 'math': the materialised blocks
  local function mask_for(src)
    if not causal then return nil end
    return causal_mask(pos[r], pos[src], q.device)
  end
  local F = lab.autograd.Function {
    forward = function(ctx, qq, kk, vv)
      local kc, vc = kk:contiguous(), vv:contiguous()
      local o, lse
      for step = 0, n - 1 do
        local src = (r - step + n) % n -- the rank whose K/V block this rank holds now
        local kn, vn, hk, hv
        if step < n - 1 then -- the next block is on its way while this one is computed
          kn, hk = pass_on(g, kc, nxt, prv, 11)
          vn, hv = pass_on(g, vc, nxt, prv, 12)
        end
        local t0 = lab.clock()
        local mask = mask_for(src)
        if mask ~= false and flash then
          o, lse = merge(o, lse, flash_block_forward(qq, kc, vc, scale, causal, pos[r], pos[src], chunk))
        elseif mask ~= false then
          o, lse = merge(o, lse, block_forward(qq, kc, vc, scale, mask))
        end
        local t1 = lab.clock()
        if hk then wait_all(hk); wait_all(hv) end
        cp.timing.compute, cp.timing.wait = cp.timing.compute + t1 - t0, cp.timing.wait + lab.clock() - t1
        if step > 0 then kc:close(); vc:close() end -- a received block, done with
        kc, vc = kn, vn
      end
      -- the merge works in f32 (the log-sum-exp is f32, and the partial outputs are summed
      -- at its precision); the output goes back in q's dtype, so the gradient that comes
      -- back is in it too, as the 16-bit kernels' backward requires
      o = o:to(qq.dtype)
      ctx:save_for_backward(qq, kk, vv, o, lse)
      return o
    end,
    backward = function(ctx, dout)
      local qq, kk, vv, o, lse = table.unpack(ctx.saved_tensors)
      dout = dout:contiguous()
      local dsum = (dout * o):sum(4, true)
      local dq = lab.zeros_like(qq)
      local kc, vc = kk:contiguous(), vv:contiguous()
      local dk, dv -- the accumulators of the block this rank holds, arriving from prv
      local pending -- handles of the accumulators in flight
      for step = 0, n - 1 do
        local src = (r - step + n) % n
        local kn, vn, hk, hv
        if step < n - 1 then
          kn, hk = pass_on(g, kc, nxt, prv, 21)
          vn, hv = pass_on(g, vc, nxt, prv, 22)
        end
        local t0 = lab.clock()
        local mask = mask_for(src)
        local cdq, cdk, cdv
        if mask ~= false and flash then
          cdq, cdk, cdv = flash_block_backward(qq, kc, vc, o, dout, lse, scale, causal, pos[r], pos[src], chunk)
        elseif mask ~= false then
          cdq, cdk, cdv = block_backward(qq, kc, vc, dout, lse, dsum, scale, mask)
        end
        local t1 = lab.clock()
        if pending then wait_all(pending.h) end -- this block's accumulators, from the previous rank
        local acc_k = pending and pending.k or lab.zeros_like(kc)
        local acc_v = pending and pending.v or lab.zeros_like(vc)
        if cdq then
          dq = dq + cdq
          acc_k, acc_v = acc_k + cdk, acc_v + cdv
        end
        if n == 1 then
          dk, dv = acc_k, acc_v
        else -- on to the next rank with the block; after N steps they are home
          local rk, hk2 = pass_on(g, acc_k:contiguous(), nxt, prv, 23)
          local rv, hv2 = pass_on(g, acc_v:contiguous(), nxt, prv, 24)
          pending = { k = rk, v = rv, h = { hk2[1], hk2[2], hv2[1], hv2[2] } }
        end
        if hk then wait_all(hk); wait_all(hv) end
        cp.timing.compute, cp.timing.wait = cp.timing.compute + t1 - t0, cp.timing.wait + lab.clock() - t1
        if step > 0 then kc:close(); vc:close() end
        kc, vc = kn, vn
      end
      if pending then
        wait_all(pending.h)
        dk, dv = pending.k, pending.v
      end
      return dq, dk, dv
    end,
  }
  return F(q, k, v)
end

-- All-gather attention (Llama 3): K and V of every rank gathered (differentiable: the
-- backward reduce-scatters their gradients), then ordinary masked attention.
function cp.allgather_attention(q, k, v, opts)
  local g, n, r, Tl, scale
  opts, g, n, r, Tl, scale = attention_args("lab.cp.allgather_attention", q, k, v, opts)
  local kall = n > 1 and D.all_gather(k:contiguous(), { group = g, dim = 3 }) or k
  local vall = n > 1 and D.all_gather(v:contiguous(), { group = g, dim = 3 }) or v
  local s = q:matmul(kall:transpose(3, 4)) * scale
  if opts.causal ~= false then
    local kpos = {}
    for j = 0, n - 1 do
      for _, p in ipairs(cp.positions(Tl * n, n, j, opts.zigzag)) do kpos[#kpos + 1] = p end
    end
    local mask = causal_mask(cp.positions(Tl * n, n, r, opts.zigzag), kpos, q.device)
    if mask then s = s + mask end
  end
  return s:softmax(4):matmul(vall)
end

-- ---- a context-parallel GPT ----
-- Built from an unsharded lab.nn.GPT with the same seed on every rank, so its parameters
-- and their names are the full model's (replicated; gradients averaged over the CP group
-- by sync_gradients). forward(ids, targets) takes the whole sequences and works on this
-- rank's positions; the loss is the mean over them (with MoE layers, plus their auxiliary
-- losses over this rank's positions, as lab.nn.GPT adds them).
-- With tp_group, tensor parallelism inside each CP rank: the modules are a lab.tp.GPT's
-- (cfg.tied = false; each TP rank attends with its heads, the vocab-parallel loss), so the
-- names and marks are lab.tp.GPT's. MoE layers (cfg.moe with group = an EP group) route
-- this rank's positions; under CP x DP their gradients go through lab.moe.sync_gradients
-- with dp_group = the grid's dp_cp_group and expert_dp_group = its edp_group.
local CPGPT = lab.nn.class("CPGPT")
cp.GPT = CPGPT
-- opts: group (CP), attention ('ring' | 'allgather'), zigzag (true), tp_group
function CPGPT:init(cfg, opts)
  errors.type("cp.GPT", 1, cfg, "table", "a config table")
  errors.opts("cp.GPT", 2, opts)
  opts = opts or {}
  errors.group("cp.GPT", 2, opts.group, "opts.group: a process group")
  errors.group("cp.GPT", 2, opts.tp_group, "opts.tp_group: a process group")
  self.cfg, self.group = cfg, opts.group or lab.dist.world_group()
  self.attention, self.zigzag = opts.attention or "ring", opts.zigzag ~= false
  if self.attention ~= "ring" and self.attention ~= "allgather" then
    error(string.format("rank %d: cp.GPT: attention must be 'ring' or 'allgather', got %s", lab.dist.rank(), tostring(opts.attention)), 0)
  end
  self.tp_group = opts.tp_group
  local full = self.tp_group and lab.tp.GPT(cfg, { group = self.tp_group }) or lab.nn.GPT(cfg)
  for _, name in ipairs(full._names) do
    if full._kinds[name] == "module" then self:add(name, full[name]) end
  end
end

-- q, k, v [B, Tl, C or C/tp] of one block's attention: the fused projection (this TP
-- rank's heads under TP, whose input is the f of Megatron's conjugate pair)
local function qkv_of(self, a, h, B, Tl, C)
  if not self.tp_group then return table.unpack(a.qkv(h):split(C, 3)) end
  h = D.copy_to_region(h, { group = self.tp_group })
  local per = C // self.tp_group:size()
  local t = h:reshape(B * Tl, C):matmul(a.qkv_weight:t()) + a.qkv_bias
  return table.unpack(t:view(B, Tl, 3 * per):split(per, 3))
end

function CPGPT:forward(ids, targets)
  local g, cfg = self.group, self.cfg
  local n, r = g:size(), g:rank()
  local T = ids.shape[2]
  local pos = cp.positions(T, n, r, self.zigzag)
  local mine = cp.shard(ids, 2, { group = g, zigzag = self.zigzag }):contiguous()
  local x = self.wte(mine) + self.wpe(lab.tensor(pos, { dtype = "i64", device = mine.device }))
  if self.drop then x = self.drop(x) end
  local attend = self.attention == "ring" and cp.ring_attention or cp.allgather_attention
  local tp = self.tp_group and self.tp_group:size() or 1
  local B, Tl, C, H = x.shape[1], x.shape[2], cfg.d_model, cfg.n_head
  local Hl = H // tp -- this TP rank's heads
  for _, block in self.blocks:iter() do
    local a = block.attn
    local q, k, v = qkv_of(self, a, block.ln1(x), B, Tl, C)
    local function heads(t) return t:view(B, Tl, Hl, C // H):transpose(2, 3) end
    local y = attend(heads(q), heads(k), heads(v), { group = g, zigzag = self.zigzag })
    y = a.proj(y:transpose(2, 3):contiguous():view(B, Tl, C // tp))
    if self.tp_group then -- lab.tp.Block: its residual dropout around both sublayers
      x = x + block:drop(y)
      x = x + block:drop(block.mlp(block.ln2(x)))
    else
      x = x + a.drop(y)
      x = x + block.mlp(block.ln2(x))
    end
  end
  x = self.ln_f(x)
  local logits
  if self.tp_group then
    logits = self.head(x) -- [B, Tl, V/tp]
  else
    logits = self.head and self.head(x) or x:view(B * Tl, C):matmul(self.wte.weight:t()):view(B, Tl, cfg.vocab)
  end
  if targets then
    local t = cp.shard(targets, 2, { group = g, zigzag = self.zigzag }):contiguous()
    local loss = self.tp_group and lab.tp.vocab_parallel_cross_entropy(logits, t, self.tp_group)
      or lab.cross_entropy(logits, t)
    if cfg.moe then loss = loss + lab.moe.aux_total(self) end -- router balance and z-losses
    return logits, loss
  end
  return logits
end

-- the replicas' gradients averaged over the CP group (each rank's loss covers its positions)
function cp.sync_gradients(model, group)
  errors.module("lab.cp.sync_gradients", 1, model)
  errors.group("lab.cp.sync_gradients", 2, group)
  group = group or lab.dist.world_group()
  if group:size() == 1 then return end
  for _, p in ipairs(model:parameters()) do
    if p.grad then lab.dist.all_reduce(p.grad, { op = "avg", group = group }) end
  end
end

return cp
