-- lab.plan's model arithmetic and memory account: parameter counts by kind, model and
-- hardware FLOPs, pipeline stage sizes (even, interleaved, or uneven as Llama 3's), and the
-- bytes each GPU holds: parameters, gradients and optimizer states (ZeRO), activations
-- (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
-- Models", Table 2, generalised to GQA, gated FFNs and models without dropout), buffers.
local M = {}

-- bytes per parameter and per activation element for a training precision
function M.bytes_per(precision)
  if precision == "f32" then return { p = 4, g = 4, k = 8, a = 4 } end -- f32 weights, f32 Adam moments
  return { p = 2, g = 2, k = 12, a = 2 } -- bf16 (and fp8 matmul) weights and grads, fp32 master + m + v
end

-- parameter counts by kind: what TP splits (matrices), what it replicates (norms, biases
-- of row-parallel layers, position embeddings), what EP splits (experts)
function M.param_counts(m)
  -- in floating point: products of sizes exceed 2^63 for the largest models
  local h, L, V = m.hidden + 0.0, m.layers + 0.0, m.vocab + 0.0
  local hd = m.head_dim or h / m.heads
  local q, kv = m.heads * hd, (m.kv_heads or m.heads) * hd
  local bias = m.bias and 1 or 0
  local attn = h * (q + 2 * kv) + q * h + bias * (q + 2 * kv) -- qkv + output projection
  local mats = m.gated and 3 or 2
  local mlp = mats * h * m.ffn + bias * m.ffn
  local seq_len = (m.seq_len or 0) + 0.0
  local experts = m.experts or 1
  local norms = 2 * h * (m.norm_params or 2)
  local c = {
    attention = L * attn,
    mlp = L * mlp * experts,
    router = (m.experts and L * h * m.experts or 0),
    replicated = L * (norms + bias * 2 * h) + (m.norm_params or 2) * h + (m.pos_emb and seq_len * h or 0),
    embedding = V * h,
    head = m.tied and 0 or V * h,
  }
  c.total = c.attention + c.mlp + c.router + c.replicated + c.embedding + c.head
  c.active = c.total - (m.experts and L * mlp * (experts - (m.top_k or 1)) or 0) -- per token
  -- the parameters a token multiplies in GEMMs: not the embedding lookup, but the head
  -- (the embedding itself when tied)
  c.matmul = c.active - c.replicated - (m.tied and 0 or c.embedding)
  c.layer_matmul = (c.matmul - V * h) / L -- per layer, active experts only
  return c
end

-- model FLOPs per step (Korthikanti et al., appendix A; PaLM's appendix B): 6 x the GEMM
-- parameters a token meets x tokens, plus attention scores and values, 12 L (heads x
-- head_dim) s per token, counted without the causal mask as both papers do.
function M.model_flops(m, tokens, seq)
  local c = M.param_counts(m)
  local q = m.heads * (m.head_dim or m.hidden / m.heads)
  return 6.0 * c.matmul * tokens + 12.0 * m.layers * q * seq * tokens
end

-- FLOPs actually executed: full recomputation repeats each layer's forward (2 x layer
-- GEMM parameters + 4 q s per token), selective recomputation only the attention core
-- (4 q s per token, Korthikanti's equation 8); flash attention's own recomputation inside
-- its backward kernel is not counted, as nobody does.
function M.hardware_flops(m, tokens, seq, recompute, attention)
  local mf = M.model_flops(m, tokens, seq)
  local c = M.param_counts(m)
  local q = m.heads * (m.head_dim or m.hidden / m.heads)
  local core = 4.0 * m.layers * q * seq * tokens
  if recompute == "full" then return mf + 2.0 * c.layer_matmul * m.layers * tokens + core end
  if recompute == "selective" and attention == "materialized" then return mf + core end
  return mf
end

-- Pipeline stages. n = p x v model chunks of c layers each; Llama 3's uneven layout
-- removes one layer from the first chunk and one from the last (the first chunk then
-- holds the embedding, the last the output layer and the loss), so a deficit d = n c - L
-- of 0, 1 or 2 layers is accepted. Returns layers on the first, a middle and the last
-- rank, or nil and why not.
function M.stages(L, p, v)
  if p == 1 then
    if v ~= 1 then return nil, "interleaving needs pipeline stages" end
    return { first = L, middle = L, last = L, chunk = L, deficit = 0 }
  end
  local n = p * v
  local c = (L + n - 1) // n
  local d = n * c - L
  if d > 2 then return nil, string.format("%d layers do not split into %d x %d chunks (a deficit of %d layers)", L, p, v, d) end
  if c == 1 and d > 0 and v == 1 then return nil, "a stage would hold no layer" end
  local full = v * c
  return { first = full - (d == 2 and 1 or 0), middle = full, last = full - (d >= 1 and 1 or 0), chunk = c, deficit = d }
end

-- Activation bytes per transformer layer for a micro-batch of b sequences of s tokens
-- (s is this rank's share of the sequence under context parallelism, s_kv the full
-- length), TP degree t. The terms of Korthikanti's Table 2 (for GPT-3: sbh(34 + 5as/h)),
-- element by element:
--   replicated across TP unless sequence parallel: both norms' inputs, the QKV and FC1
--   inputs (4 sbh elements), one dropout mask byte per element after attention and MLP;
--   split by TP: Q, K, V, the attention output, the FFN activation's input (twice for a
--   gated FFN) and FC2's input; the attention scores (softmax output, dropout mask and
--   output: 5as^2b bytes) unless flash attention or selective recomputation drops them;
--   full recomputation keeps each layer's input only (/t with sequence parallelism).
-- MoE: the expert part (FC1 input, activation, FC2 input) scales with top_k x the load on
-- the busiest expert rank.
function M.activation_bytes_per_layer(m, o, b, s, t, recompute, sp)
  local e = M.bytes_per(o.precision).a
  local h = m.hidden + 0.0
  local hd = m.head_dim or h / m.heads
  local q, f = m.heads * hd, m.ffn + 0.0
  local kv = math.max(m.kv_heads, t) * hd -- over all TP ranks: kv heads replicate when fewer than t
  local n = b * s
  if recompute == "full" then return e * n * h / (sp and t or 1) end
  local masks = m.dropout and 2 * h or 0
  local load = m.experts and (m.top_k or 1) * (o.expert_load or 1) or 1
  local rep = n * (e * 4 * h + masks)
  local split = n * e * (q + kv + kv + q) + n * e * load * ((m.gated and 2 or 1) * f + f)
  if m.experts then rep = rep + n * e * h * (load - 1) end -- the routed copies of FC1's input
  local scores = 0
  if (o.attention or "flash") == "materialized" and recompute ~= "selective" then
    scores = b * m.heads * s * (o.seq + 0.0) * (e + (m.dropout and (1 + e) or 0))
  end
  return rep / (sp and t or 1) + split / t + scores / t
end

-- Memory per GPU on the pipeline rank that holds the most: fills r.mem_* and r.fits.
-- c: the layout {dp, tp, pp, cp, ep, zero, mb, recompute, v}; st: M.stages(...)
function M.account(m, gpu, o, c, r, st)
  local L, s, V = m.layers, o.seq + 0.0, m.vocab + 0.0
  local t, p, d, cp, ep = c.tp, c.pp, c.dp, c.cp or 1, c.ep or 1
  local sp = t > 1 and o.sequence_parallel ~= false
  local bp = M.bytes_per(o.precision)
  local counts = M.param_counts(m)
  -- experts split over ep x tp, or over ep alone when their ranks span TP (etp1)
  local per_layer = (counts.attention + counts.router) / L / t + counts.mlp / ep / (c.etp1 and 1 or t) / L + counts.replicated / L
  local zero, dz = c.zero or 0, d * cp -- ZeRO shards over the data-parallel ranks (and CP)
  local in_flight_scale = (c.v or 1) > 1 and (1 + (p - 1) / (p * c.v)) or 1
  local act_layer = M.activation_bytes_per_layer(m, o, c.mb, s / cp, t, c.recompute, sp)
  -- one layer's full activations exist while its backward runs after recomputation
  local transient = c.recompute == "full" and M.activation_bytes_per_layer(m, o, c.mb, s / cp, t, "none", sp) or 0
  local logits = 4 * c.mb * s / cp * V / t -- fp32 logits of a micro-batch (Korthikanti 4sbv/t)
  local worst
  -- rank 0 (embedding, p micro-batches in flight), rank 1 (a full middle stage, p-1 in
  -- flight), the last rank (output layer and its logits, 1 in flight)
  local ranks = p == 1 and { { layers = L, extra = counts.embedding + counts.head, in_flight = 1, logits = true } }
      or { { layers = st.first, extra = counts.embedding, in_flight = p },
        p > 2 and { layers = st.middle, extra = 0, in_flight = p - 1 } or nil,
        { layers = st.last, extra = counts.head > 0 and counts.head or counts.embedding, in_flight = 1, logits = true } }
  for _, rk in pairs(ranks) do
    local psi = per_layer * rk.layers + rk.extra / t
    local mem_params = bp.p * psi / (zero >= 3 and dz or 1)
    local mem_grads = bp.g * psi / (zero >= 2 and dz or 1)
    local mem_optimizer = bp.k * psi / (zero >= 1 and dz or 1)
    local in_flight = math.min(rk.in_flight, r.microbatches)
    local mem_act = act_layer * rk.layers * in_flight * in_flight_scale + transient
    -- ZeRO-3 holds the layer it computes and the one it prefetches gathered
    local gathered = zero >= 3 and 2 * bp.p * per_layer or 0
    local mem_buf = (o.workspace or 2 ^ 30) + (rk.logits and logits or 0) + gathered
    local total = mem_params + mem_grads + mem_optimizer + mem_act + mem_buf
    if not worst or total > worst.total then
      worst = { psi = psi, params = mem_params, grads = mem_grads, optimizer = mem_optimizer, act = mem_act, buf = mem_buf,
        total = total, layers = rk.layers, in_flight = in_flight }
    end
  end
  r.params_per_gpu = worst.psi
  r.mem_params, r.mem_grads, r.mem_optimizer = worst.params, worst.grads, worst.optimizer
  r.mem_activations, r.mem_buffers, r.mem_total = worst.act, worst.buf, worst.total
  r.act_layer, r.layers_held, r.in_flight = act_layer, worst.layers, worst.in_flight
  r.fits = r.mem_total <= gpu.hbm * (o.memory_fraction or 1)
  if not r.fits then
    r.why = string.format("needs %.1f GB per GPU, has %.0f GB (over by %.1f GB)", r.mem_total / 1e9, gpu.hbm / 1e9,
      (r.mem_total - gpu.hbm) / 1e9)
  end
end

return M
