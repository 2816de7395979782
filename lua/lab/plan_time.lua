-- lab.plan's time model: how long one layout's training step takes, and the traffic it
-- moves. Compute is a roofline per operation, from the shapes a rank really runs: each
-- GEMM takes max(FLOPs / (peak x achievable GEMM fraction x tile and wave occupancy),
-- bytes / HBM bandwidth); attention is the flash-attention kernel (causal: half the
-- score FLOPs, backward 2.5x forward) or, when scores are materialised, two batched GEMMs
-- plus the softmax/dropout passes over the s x s scores; norms, residual adds, dropout and
-- activation functions stream their bytes through HBM. Communication is ring algorithms
-- at a bus efficiency of the link (NVLink inside a node, the network across): TP and CP
-- collectives and EP all-to-alls sit in the layer's critical path; pipeline
-- point-to-point and data-parallel reductions overlap what they can. The step is the
-- slowest pipeline rank's micro-batch time x (m + (p-1)/v), plus what stays exposed.
-- Beside the roofline, the time it does not see (plan_presets.terms, each cited): the
-- attention kernel's speed by kernel, head dimension and sequence length; a latency per
-- ring step and a launch per collective call (FSDP's three calls per layer, DP's buckets);
-- compute slowed beside overlapped collectives; framework overhead per layer per pass;
-- FP8 casts; dropless MoE dispatch passes; blocking pipeline sends.
local mem = require("lab.plan_memory")
local presets = require("lab.plan_presets")
local M = {}

local TERMS = presets.terms
local LAUNCH = TERMS.launch -- seconds per kernel launch the roofline cannot see
-- output tile shapes a GEMM library chooses among, with their efficiency relative to the
-- largest: the best one for the shape is taken (tile and wave quantisation)
local TILES = { { 256, 128, 1.0 }, { 128, 256, 1.0 }, { 128, 128, 0.95 }, { 128, 64, 0.85 }, { 64, 128, 0.85 } }

local ceil = math.ceil

-- fields a custom GPU table may leave out
function M.with_defaults(gpu)
  local g = {}
  for k, v in pairs(gpu) do g[k] = v end
  g.sms = g.sms or 108
  g.gemm = g.gemm or 0.75
  g.attention = g.attention or 0.5
  g.memory = g.memory or 0.85
  g.hbm_bw = g.hbm_bw or 2e12
  g.nvlink = g.nvlink or 300e9
  g.network = g.network or 25e9
  g.per_node = g.per_node or 8
  g.generation = g.generation or "a100"
  return g
end

-- seconds for `batch` GEMMs [rows, K] x [K, N] with e-byte operands at `peak` FLOP/s
function M.gemm(gpu, peak, rows, K, N, e, batch, frac)
  batch = batch or 1
  frac = frac or gpu.gemm
  if rows <= 0 or K <= 0 or N <= 0 then return 0 end
  local flops = 2.0 * rows * K * N * batch
  local bytes = e * (rows * K + K * N + rows * N) * batch
  local occupancy = 0
  for _, tile in ipairs(TILES) do
    local tiles = ceil(rows / tile[1]) * ceil(N / tile[2]) * batch
    local waves = ceil(tiles / gpu.sms)
    local u = rows * N * batch / (waves * gpu.sms * tile[1] * tile[2]) * tile[3]
    if u > occupancy then occupancy = u end
  end
  return math.max(flops / (peak * frac * occupancy), bytes / (gpu.hbm_bw * gpu.memory)) + LAUNCH
end

local function ring(k) return k > 1 and (k - 1) / k or 0 end

-- seconds for one collective call that puts `wire` bytes per GPU on a link of bandwidth bw
-- in `steps` ring steps, each paying alpha (plan_presets.terms: NVLink inside a node, the
-- network across; o.latency overrides it), plus the call's kernel launch
local function link_time(o, wire, bw, steps, cross)
  if wire <= 0 then return 0 end
  local alpha = o.latency or (cross and TERMS.alpha_net or TERMS.alpha_nvlink)
  return wire / (bw * (o.bus_efficiency or 0.8)) + alpha * (steps or 1) + LAUNCH
end
M.link_time = link_time

-- whether a group of `size` ranks placed `stride` apart crosses nodes
local function crosses(gpu, stride, size) return size > 1 and stride * size > gpu.per_node end

-- Attention kernel speed as a fraction of peak: the generation's FlashAttention-2 fraction
-- x the kernel's speed relative to it x head dimension x sequence length (the papers'
-- figures, plan_presets.terms)
-- the three factors: kernel, head dimension (between the figures' 64 and 128, linear;
-- below 64, in proportion), sequence length
function M.attention_factors(gpu, o, hd, s)
  local k = TERMS.attention_kernels[o.attention_kernel or "fa2"] or TERMS.attention_kernels.fa2
  local kf = k[gpu.generation] or 1
  if o.attention_kernel == "triton" and gpu.generation == "h100" then
    kf = o.triton_hopper or presets.free_options().triton_hopper -- a free parameter (plan_presets.free)
  end
  local hf = TERMS.attention_head_dim[hd]
  if not hf then hf = hd < 128 and 0.85 + 0.15 * math.max(hd - 64, 0) / 64 or 1.0 end
  if hd < 64 then hf = 0.85 * hd / 64 end
  return kf, hf, s / (s + TERMS.attention_seq_knee)
end

function M.attention_fraction(gpu, o, hd, s)
  local kf, hf, sf = M.attention_factors(gpu, o, hd, s)
  return gpu.attention * kf * hf * sf
end

-- Bandwidth per GPU of a ring over `size` ranks placed `stride` apart, with ranks laid out
-- as Megatron-LM does (tp innermost, then cp, ep, dp, pp outermost): inside one node the
-- ring runs on NVLink; across nodes, with g members of the group in each node, NCCL runs g
-- rings side by side, each through its own NIC, so the network gives g x its per-GPU
-- bandwidth (never more than NVLink). A group with one member per node (tp 8's dp group)
-- gets one NIC per GPU.
function M.group_bw(gpu, stride, size)
  if size <= 1 or stride * size <= gpu.per_node then return gpu.nvlink end
  local in_node = math.max(1, math.min(size, gpu.per_node // stride))
  return math.min(gpu.nvlink, in_node * gpu.network)
end

-- Seconds for one all-to-all in which each of `size` ranks, placed `stride` apart, holds
-- `bytes` to scatter evenly over the group (itself included). It is point-to-point, not a
-- ring: inside one node the (size - 1)/size that leaves the rank crosses NVLink; across
-- nodes, the share bound for the other nodes' ranks leaves through this GPU's own NIC
-- (NCCL's alltoall is a send and a receive per peer, each inter-node one on the GPU's
-- nearest NIC; DeepSeek-V3, arXiv:2412.19437, section 3.2.1: cross-node all-to-all is
-- bounded by the 50 GB/s InfiniBand per GPU against NVLink's 160), while the share for the
-- ranks in its own node crosses NVLink at the same time.
function M.all_to_all_time(gpu, o, bytes, stride, size)
  if not crosses(gpu, stride, size) then
    return link_time(o, bytes * ring(size), M.group_bw(gpu, stride, size), size - 1, false)
  end
  local in_node = math.max(1, math.min(size, gpu.per_node // stride))
  local off = link_time(o, bytes * (size - in_node) / size, gpu.network, size - in_node, true)
  local on = in_node > 1 and link_time(o, bytes * (in_node - 1) / size, gpu.nvlink, in_node - 1, false) or 0
  return math.max(off, on)
end

local function peaks(gpu, o)
  local matmul = (o.precision == "fp8" and gpu.fp8) or gpu.bf16
  if o.precision == "f32" then matmul = gpu.f32 or gpu.bf16 / 2 end
  return matmul, (o.precision == "f32" and matmul or gpu.bf16)
end

-- ---- traffic per GPU per step (wire bytes, ring algorithms) ----
-- Each is a named function so that measured runs (tests/lua/test_plan_checks.lua) and the
-- MoE/CP labs can compare them byte for byte.

-- TP: per layer 4 collectives of a [b, s, h] activation (2 forward, 2 backward; all-reduce,
-- or all-gather + reduce-scatter with SP: the same bytes), 2 more when the forward is
-- recomputed; plus the embedding's all-reduce and backward (2) and vocab-parallel
-- cross-entropy's three fp32 all-reduces of [b, s] per micro-batch, as lab.tp does.
function M.tp_bytes(m, o, c, layers)
  local t = c.tp
  if t <= 1 then return 0 end
  local e = mem.bytes_per(o.precision).p
  local act = c.mb * (o.seq / (c.cp or 1)) * m.hidden * e
  local per_layer = 4 + (c.recompute == "full" and 2 or 0)
  return (per_layer * layers + 2) * c.microbatches * 2 * ring(t) * act
      + 3 * c.microbatches * c.mb * o.seq / (c.cp or 1) * 4 * 2 * ring(t)
end

-- DP: gradients all-reduced (ZeRO-1/2: reduce-scatter + all-gather, the same bytes);
-- ZeRO-3 all-gathers parameters for forward and backward and reduce-scatters gradients,
-- for every micro-batch (the parameters are not kept between them).
-- reduce_dtype = "fp32": gradients reduced in fp32 (FSDP's mixed precision with an fp32
-- reduce_dtype, Composer's "DEFAULT" mode), parameters still gathered in bf16.
local function reduce_bytes(o)
  return o.reduce_dtype == "fp32" and 4 or mem.bytes_per(o.precision).g
end

-- Bytes streamed per gradient element before its reduction, on the compute stream
-- (plan_presets.terms, the gradient preparation): with grad_predivide (PyTorch 1.13's FSDP)
-- an in-place division in the gradient's dtype (read and write), then the cast to fp32 when
-- it is reduced wider than the backward computed it (read 2, write 4).
function M.grad_prep_bytes(o)
  local g, rg = mem.bytes_per(o.precision).g, reduce_bytes(o)
  return (o.grad_predivide and 2 * g or 0) + (rg > g and g + rg or 0)
end

function M.dp_bytes(o, c, psi)
  local dz = c.dp * (c.cp or 1)
  if dz <= 1 then return 0 end
  local rg = reduce_bytes(o)
  if (c.zero or 0) >= 3 then
    return ring(dz) * (2 * mem.bytes_per(o.precision).p + rg) * psi * (c.microbatches or 1)
  end
  return 2 * ring(dz) * rg * psi
end

-- PP: each micro-batch's activation forward and its gradient backward, per model chunk
function M.pp_bytes(m, o, c)
  if c.pp <= 1 then return 0 end
  local sp = c.tp > 1 and o.sequence_parallel ~= false
  local act = c.mb * (o.seq / (c.cp or 1)) * m.hidden * mem.bytes_per(o.precision).p
  return 2 * c.microbatches * act / (sp and c.tp or 1) * (c.v or 1)
end

-- Bytes one rank sends in one expert-parallel all-to-all (dispatch or combine) of a
-- micro-batch: its tokens x top_k rows of `hidden` elements, of which (ep - 1)/ep leave the
-- rank. With a capacity factor the buffers are padded to capacity: experts x C rows per
-- group of tokens/groups, C = ceil(capacity_factor x (tokens/groups) x top_k / experts)
-- (lab.moe's layout, so measured bytes can be compared exactly); without, routing is
-- uniform times `imbalance` (the busiest rank's load over the mean, 1 when balanced).
function M.ep_all_to_all_bytes(tokens, hidden, top_k, ep, elem_bytes, capacity_factor, experts, groups, imbalance)
  if ep <= 1 then return 0 end
  local rows = tokens * (top_k or 1) * (imbalance or 1)
  if capacity_factor and experts then
    groups = groups or 1
    rows = groups * experts * math.ceil(capacity_factor * (tokens / groups) * (top_k or 1) / experts)
  end
  return rows * hidden * elem_bytes * (ep - 1) / ep
end

-- EP: per MoE layer, dispatch and combine all-to-alls forward and backward
function M.ep_bytes(m, o, c, layers)
  local ep = c.ep or 1
  if ep <= 1 or not m.experts then return 0 end
  local tokens = c.mb * (o.seq / (c.cp or 1)) / (c.etp1 and c.tp or 1)
  return layers * 4 * c.microbatches * M.ep_all_to_all_bytes(tokens, m.hidden, m.top_k, ep, mem.bytes_per(o.precision).p,
    o.capacity_factor, m.experts, 1, o.expert_imbalance)
end

-- CP (all-gather attention, as Llama 3): per layer the K and V of this TP rank's kv heads
-- are all-gathered forward (again when recomputed) and their gradients reduce-scattered
-- backward: (cp - 1) shards of [b, s/cp, kv] each way
function M.cp_bytes(m, o, c, layers)
  local cp = c.cp or 1
  if cp <= 1 then return 0 end
  local hd = m.head_dim or m.hidden / m.heads
  local kv_local = math.max(m.kv_heads / c.tp, 1) * hd
  local kv = c.mb * (o.seq / cp) * 2 * kv_local * mem.bytes_per(o.precision).p
  local passes = 2 + (c.recompute == "full" and 1 or 0)
  return layers * passes * c.microbatches * (cp - 1) * kv
end

-- ---- one layer, one micro-batch, on one rank ----
-- Returns seconds: fwd, bwd, rec (recomputation), and the part of each that is
-- communication (tp, cp, ep), for a dense or MoE layer.
function M.layer(m, gpu, o, c)
  local t, cp, ep = c.tp, c.cp or 1, c.ep or 1
  local sp = t > 1 and o.sequence_parallel ~= false
  local e = mem.bytes_per(o.precision).a
  local eg = o.precision == "fp8" and 1 or e -- GEMM operand bytes
  local peak, peak16 = peaks(gpu, o)
  local gf = o.precision == "fp8" and (gpu.gemm_fp8 or gpu.gemm) or gpu.gemm
  local function gemm(rows, K, N, el, batch) return M.gemm(gpu, peak, rows, K, N, el, batch, gf) end
  local h = m.hidden + 0.0
  local hd = m.head_dim or h / m.heads
  local q, f = m.heads * hd, m.ffn + 0.0
  local kv_total = math.max(m.kv_heads, t) * hd
  local s_full = o.seq + 0.0
  local s = s_full / cp
  local n = c.mb * s
  -- GEMMs forward: QKV, output projection, FFN (dense or the local experts)
  local g = gemm(n, h, (q + 2 * kv_total) / t, eg) + gemm(n, q / t, h, eg)
  local load = 1
  -- experts whose ranks span TP (etp1) take whole experts and route this rank's sequence-
  -- parallel share of the tokens; otherwise each expert is split over tp as the layer is
  local et = c.etp1 and 1 or t
  local n_moe = c.etp1 and n / t or n
  if m.experts then
    load = o.expert_load or 1
    local local_experts = m.experts / ep
    local rows = n_moe * (m.top_k or 1) * load / local_experts -- tokens per local expert
    g = g + gemm(n, h, m.experts, eg) -- router
        + gemm(rows, h, (m.gated and 2 or 1) * f / et, eg, local_experts)
        + gemm(rows, f / et, h, eg, local_experts)
  else
    g = g + gemm(n, h, (m.gated and 2 or 1) * f / t, eg) + gemm(n, f / t, h, eg)
  end
  -- attention core
  local attn_f, attn_b
  local heads_local = m.heads / t
  if (o.attention or "flash") == "materialized" then
    local batch = c.mb * heads_local
    local scores = batch * s * s_full
    local pass_f = (m.dropout and 9 or 4) * scores / (gpu.hbm_bw * gpu.memory) -- softmax (+ dropout)
    local pass_b = (m.dropout and 11 or 6) * scores / (gpu.hbm_bw * gpu.memory)
    local mm = M.gemm(gpu, peak16, s, hd, s_full, e, batch) + M.gemm(gpu, peak16, s, s_full, hd, e, batch)
    attn_f, attn_b = mm + pass_f, 2 * mm + pass_b
  else
    local flops = 4.0 * c.mb * s * (s_full / 2) * heads_local * hd -- causal: half the scores
    local frac = M.attention_fraction(gpu, o, hd, s)
    attn_f = flops / (peak16 * frac) + LAUNCH
    attn_b = 2.5 * flops / (peak16 * frac) + LAUNCH
  end
  -- element-wise passes forward: norms (read + write), two bias-dropout-residual adds
  -- (read 2, write 1), in the replicated region unless SP; the FFN activation (read 2f
  -- and write f when gated, else read f write f) in the split region
  local rep = e * 10 * h + (m.dropout and 2 * h or 0)
  local act_fn = e * (m.gated and 3 or 2) * f * (m.experts and (m.top_k or 1) * load or 1)
  -- FP8: every GEMM input is cast from bf16 (read 2, write 1 byte per element)
  -- (the expert GEMMs' inputs are the routed copies: top_k x load of them per token)
  local k_load = m.experts and (m.top_k or 1) * load or 1
  local cast = o.precision == "fp8" and TERMS.fp8_cast_bytes * (h / (sp and t or 1) + q / t + k_load * (h + f) / t) or 0
  -- dropless MoE token dispatch: permute into expert order, sort by local expert after the
  -- all-to-all, and back (plan_presets.terms.moe_dispatch_passes passes over the routed copies)
  local dispatch = m.experts and ep >= 1 and TERMS.moe_dispatch_passes * e * k_load * h * (n_moe / n) or 0
  local elem = n * (rep / (sp and t or 1) + act_fn / t + cast + dispatch) / (gpu.hbm_bw * gpu.memory)
  -- communication in the layer's critical path
  local ab = n * h * e
  local tp_full = t > 1 and link_time(o, 2 * ring(t) * ab, M.group_bw(gpu, 1, t), 2 * (t - 1), crosses(gpu, 1, t)) or 0
  local tp1 = tp_full * (1 - (o.tp_overlap or 0))
  -- what tp_overlap hides still slows the compute beside it (contention)
  local tp_hidden = (o.contention or 0) * tp_full * (o.tp_overlap or 0)
  local cp1 = 0
  if cp > 1 then
    local kv_local = math.max(m.kv_heads / t, 1) * hd
    cp1 = link_time(o, (cp - 1) * n * 2 * kv_local * e, M.group_bw(gpu, t, cp), cp - 1, crosses(gpu, t, cp))
  end
  local ep1 = 0
  if ep > 1 and m.experts then
    local stride = c.etp1 and 1 or t * cp
    ep1 = M.all_to_all_time(gpu, o, n_moe * (m.top_k or 1) * load * h * e, stride, ep)
  end
  local comm_f = 2 * tp1 + cp1 + 2 * ep1
  local comm_b = 2 * tp1 + cp1 + 2 * ep1
  -- framework work between kernels, per layer per pass (plan_presets.free: layer_overhead)
  local over = (o.layer_overhead or 0) + 2 * tp_hidden
  local fwd = g + attn_f + elem + comm_f + over
  local bwd = 2 * g + attn_b + 2 * elem + comm_b + over
  local rec = 0
  if c.recompute == "full" then rec = fwd
  elseif c.recompute == "selective" and (o.attention or "flash") == "materialized" then rec = attn_f end
  return { fwd = fwd, bwd = bwd, rec = rec, comm = comm_f + comm_b + (c.recompute == "full" and comm_f or 0),
    gemm = g, attention = attn_f + attn_b, elementwise = 3 * elem, overhead = over * (c.recompute == "full" and 3 or 2),
    attention_fraction = (o.attention or "flash") ~= "materialized" and M.attention_fraction(gpu, o, hd, s) or nil }
end

-- the output layer and loss for one micro-batch: logits GEMM forward and two backward,
-- fp32 softmax cross-entropy passes over [b, s, V/t]
function M.head(m, gpu, o, c)
  local e = mem.bytes_per(o.precision).a
  local peak = peaks(gpu, o)
  local n = c.mb * o.seq / (c.cp or 1)
  local V = m.vocab / c.tp
  local g = M.gemm(gpu, peak, n, m.hidden, V, o.precision == "fp8" and 1 or e)
  return 3 * g + 4 * 4 * n * V / (gpu.hbm_bw * gpu.memory)
end

-- Fills r with step time, exposed communication, MFU and HFU. lt: M.layer(...), st: the
-- pipeline stages (plan_memory.stages), counts: param_counts
function M.step(m, gpu, o, c, r, lt, st)
  local t, p, d, cp = c.tp, c.pp, c.dp, c.cp or 1
  local v = c.v or 1
  local mb_count = r.microbatches
  local per_layer = lt.fwd + lt.bwd + lt.rec
  local head = M.head(m, gpu, o, c)
  -- per micro-batch time of each pipeline rank; the slowest sets the pace
  local first = st.first * per_layer + (p == 1 and head or 0)
  local middle = st.middle * per_layer
  local last = st.last * per_layer + head
  local stage = math.max(first, middle, last)
  -- pipeline point-to-point on the critical path: a blocking engine (DeepSpeed's
  -- PipelineEngine runs SendActivation/RecvActivation and SendGrad/RecvGrad as synchronous
  -- steps of its schedule, deepspeed/runtime/pipe/engine.py) waits for each micro-batch's
  -- activation forward and its gradient backward; Megatron-LM's schedules overlap them
  local sp_pp = t > 1 and o.sequence_parallel ~= false
  local act_pp = c.mb * (o.seq / cp) * m.hidden * mem.bytes_per(o.precision).p / (sp_pp and t or 1)
  local pp_cross = t * cp * d >= gpu.per_node
  local pp_link = pp_cross and gpu.network or gpu.nvlink
  -- A blocking transfer holds both its ends: a middle stage's timeline carries four per
  -- micro-batch (it receives the activation, sends its own, receives the gradient, sends its
  -- own: plan_presets.terms.pp_blocking_transfers), the first and last stage two.
  r.t_pp_blocking = 0
  if o.pp_blocking and p > 1 then
    local transfers = p > 2 and TERMS.pp_blocking_transfers or 2
    r.t_pp_blocking = transfers * link_time(o, act_pp, pp_link, 1, pp_cross)
    stage = stage + r.t_pp_blocking
  end
  r.stage_s = stage
  r.bubble = p > 1 and (p - 1) / (v * mb_count) or 0
  r.compute_s = mb_count * stage
  local pipe = (mb_count + (p > 1 and (p - 1) / v or 0)) * stage
  -- pipeline point-to-point: the fill and drain cross every chunk boundary once each way,
  -- one NIC each way when neighbouring stages are in different nodes
  r.t_pp = p > 1 and 2 * (p - 1) * v * link_time(o, act_pp, pp_link, 1, pp_cross) or 0
  -- data parallel. The gradient reduction (all-reduce, or ZeRO's reduce-scatter) overlaps
  -- the backward of the last micro-batch; ZeRO-1/2's all-gather of the updated parameters
  -- follows the optimizer step, exposed unless prefetched under the next forward
  -- (param_gather_overlap, as FSDP). dp_overlap = false (Megatron-LM before 2022, DeepSpeed's
  -- pipeline engine) exposes all of it.
  local dz = d * cp
  local bw_dp = M.group_bw(gpu, t, dz)
  local cross_dp = crosses(gpu, t, dz)
  local zero = c.zero or 0
  local exposed_dp = 0
  r.t_dp, r.t_grad_prep = 0, 0
  if dz > 1 and zero >= 3 then
    -- ZeRO-3 / FSDP, layer by layer: every micro-batch gathers each layer's parameters before
    -- its forward and again before its backward, and reduce-scatters its gradients after: three
    -- calls per layer, each n - 1 ring steps. Prefetched one layer ahead, a gather hides under
    -- the previous layer's compute when it is shorter; the first gather of the forward, and the
    -- last reduce-scatter, hide under nothing.
    local bp = mem.bytes_per(o.precision)
    local layers = r.layers_held
    local psi_layer = r.params_per_gpu / layers
    local gather = link_time(o, ring(dz) * bp.p * psi_layer, bw_dp, dz - 1, cross_dp)
    local scatter = link_time(o, ring(dz) * reduce_bytes(o) * psi_layer, bw_dp, dz - 1, cross_dp)
    r.t_dp = mb_count * layers * (2 * gather + scatter)
    -- each micro-batch prepares every layer's whole unsharded gradient before its reduce-scatter
    r.t_grad_prep = mb_count * layers * M.grad_prep_bytes(o) * psi_layer / (gpu.hbm_bw * gpu.memory)
    if o.dp_overlap == false then exposed_dp = r.t_dp
    else
      local f1, b1 = lt.fwd, lt.bwd + lt.rec
      exposed_dp = mb_count * (gather + (layers - 1) * math.max(gather - f1, 0)
        + layers * math.max(gather + scatter - b1, 0) + scatter)
    end
  elseif dz > 1 then
    -- gradients are reduced in buckets (plan_presets.terms.dp_bucket_bytes), one call each:
    -- each call pays a tree's 2 log2 n steps and a launch
    local calls = math.max(1, math.ceil(reduce_bytes(o) * r.params_per_gpu / TERMS.dp_bucket_bytes))
    r.t_grad_prep = M.grad_prep_bytes(o) * r.params_per_gpu / (gpu.hbm_bw * gpu.memory) -- once a step
    r.t_dp = link_time(o, r.bytes_dp, bw_dp, calls * 2 * math.log(dz, 2), cross_dp) + (calls - 1) * LAUNCH
    exposed_dp = r.t_dp
    if o.dp_overlap ~= false then
      local bwd_window, fwd_window = lt.bwd * st.middle, lt.fwd * st.middle
      if zero >= 1 then
        exposed_dp = math.max(r.t_dp / 2 - bwd_window, 0) + math.max(r.t_dp / 2 - (o.param_gather_overlap and fwd_window or 0), 0)
      else
        exposed_dp = math.max(r.t_dp - bwd_window, 0)
      end
      -- the link is busy for t_dp in all: no more of it hides than the step computes
      exposed_dp = math.max(exposed_dp, r.t_dp - r.compute_s)
    end
  end
  -- compute that runs beside an overlapped collective runs slower: NCCL's kernels take SMs
  -- and HBM bandwidth (plan_presets.free: contention)
  r.t_contention = (o.contention or 0) * math.min(r.t_dp - exposed_dp, r.compute_s)
  r.t_dp_exposed = exposed_dp
  -- the optimizer streams fp32 master weights, two moments, gradients and the bf16 copy
  local shard = r.params_per_gpu / (((c.zero or 0) >= 1) and dz or 1)
  r.t_optimizer = shard * 32 / (gpu.hbm_bw * gpu.memory)
  r.t_layer_comm = lt.comm * st.middle * mb_count
  r.step_s = pipe + r.t_pp + exposed_dp + r.t_contention + r.t_optimizer + r.t_grad_prep
  r.comm_exposed = r.t_layer_comm + r.t_pp + exposed_dp
  r.comm_share = r.comm_exposed / r.step_s
  local tokens = o.global_batch * (o.seq + 0.0)
  r.model_flops = mem.model_flops(m, tokens, o.seq)
  r.hardware_flops = mem.hardware_flops(m, tokens, o.seq, c.recompute, o.attention or "flash")
  local gpus = d * t * p * cp
  local peak = peaks(gpu, o)
  r.mfu = r.model_flops / (r.step_s * gpus * peak)
  r.hfu = r.hardware_flops / (r.step_s * gpus * peak)
  r.tokens_per_s = tokens / r.step_s
end

return M
