-- lab.plan: "what if" for parallel training configurations far beyond this machine.
--
--   lab.plan{model='llama3-70b', gpus=1024, gpu='h100', global_batch=1024, seq=8192}
--   llmlab --plan model=llama3-70b gpus=1024 gpu=h100 global_batch=1024 seq=8192
--
-- It enumerates dp x tp x pp x cp x ep, ZeRO stage, micro-batch, activation recomputation
-- and virtual pipeline stages; keeps the layouts that divide evenly and fit in memory; and
-- for each computes, per GPU:
--   memory   parameters, gradients, optimizer states (ZeRO), activations (Korthikanti et al.
--            2022, with sequence parallelism and recomputation variants), buffers;
--   traffic  bytes per step for TP (all-reduce, or all-gather + reduce-scatter with SP), DP
--            (all-reduce, or reduce-scatter + all-gather with ZeRO), PP (point-to-point),
--            EP (all-to-all), CP (all-gather of K and V);
--   time     compute from FLOPs (6 N T + attention, plus recomputation) at an efficiency
--            factor of peak, communication from a latency-bandwidth model per link (NVLink
--            inside a node, the network across), the pipeline bubble (p-1)/(v m), and the
--            resulting MFU and tokens/s.
-- Assumptions (all overridable): bf16 weights and gradients with fp32 Adam states (16
-- bytes per parameter before ZeRO), efficiency 0.55 of dense peak for the GEMM-bound
-- compute, DP communication overlapped with backward except for 20% of it, TP and EP
-- communication exposed, 1 GiB of workspace per GPU, flash attention (no s^2 scores kept).
local presets = require("lab.plan_presets")
local plan = {}

local function copy(t)
  local o = {}
  for k, v in pairs(t or {}) do o[k] = v end
  return o
end

-- ---- model arithmetic ----

-- parameter counts by kind: what TP splits (matrices), what it replicates (norms, biases
-- of row-parallel layers, position embeddings), what EP splits (experts)
function plan.param_counts(m)
  -- in floating point: products of sizes exceed 2^63 for the largest models
  local h, L, V = m.hidden + 0.0, m.layers + 0.0, m.vocab + 0.0
  local hd = h / m.heads
  local kv = (m.kv_heads or m.heads) * hd
  local bias = m.bias and 1 or 0
  local attn = h * (h + 2 * kv) + h * h + bias * (h + 2 * kv) -- qkv + output projection
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
  return c
end

-- model FLOPs per step: 6 x active parameters x tokens, plus attention scores and
-- values: 12 L h s per token (Kaplan et al.; PaLM's appendix B)
function plan.model_flops(m, tokens, seq)
  local c = plan.param_counts(m)
  return 6.0 * c.active * tokens + 12.0 * m.layers * m.hidden * seq * tokens
end

-- ---- one configuration ----

local function bytes_per(precision)
  if precision == "f32" then return { p = 4, g = 4, k = 8 } end -- f32 weights, f32 Adam moments
  if precision == "fp8" then return { p = 2, g = 2, k = 12 } end
  return { p = 2, g = 2, k = 12 } -- bf16 weights and grads, fp32 master + m + v (K = 12)
end

-- Korthikanti et al. (2022), bytes of activations per layer for a micro-batch of b
-- sequences of s tokens, hidden h, a heads, TP degree t: sbh(34 + 5as/h) unsplit; the 5as/h
-- term (attention scores) is what selective recomputation and flash attention drop; TP
-- splits 24 of the 34 unless sequence parallelism splits them all; full recomputation
-- keeps only each layer's input (2sbh, /t with SP).
function plan.activation_bytes_per_layer(m, o, b, s, t, recompute, sp)
  local h, a = m.hidden, m.heads
  local scores = (o.attention == "materialized" and recompute ~= "selective") and 5 * a * s / h or 0
  if recompute == "full" then return 2 * s * b * h / (sp and t or 1) end
  if sp then return s * b * h / t * (34 + scores) end
  return s * b * h * (10 + 24 / t + scores / t)
end

local function ceil_div(a, b) return (a + b - 1) // b end

-- Bytes one rank sends in one expert-parallel all-to-all (dispatch or combine) of a
-- micro-batch: its tokens x top_k rows of `hidden` elements, of which (ep - 1)/ep leave the
-- rank. With a capacity factor the buffers are padded to capacity: experts x C rows per
-- group of tokens/groups, C = ceil(capacity_factor x (tokens/groups) x top_k / experts)
-- (lab.moe's layout, so measured bytes can be compared exactly); without, routing is
-- taken as uniform.
function plan.ep_all_to_all_bytes(tokens, hidden, top_k, ep, elem_bytes, capacity_factor, experts, groups)
  if ep <= 1 then return 0 end
  local rows = tokens * (top_k or 1)
  if capacity_factor and experts then
    groups = groups or 1
    rows = groups * experts * math.ceil(capacity_factor * (tokens / groups) * (top_k or 1) / experts)
  end
  return rows * hidden * elem_bytes * (ep - 1) / ep
end

-- Evaluates one layout; returns a table with .fits, .why (when not), memory, traffic,
-- time, mfu. c: {dp, tp, pp, cp, ep, zero, mb, recompute, v}
function plan.evaluate(m, gpu, o, c)
  local r = copy(c)
  local L, h, s, V = m.layers, m.hidden + 0.0, o.seq + 0.0, m.vocab + 0.0
  local t, p, d, cp, ep = c.tp, c.pp, c.dp, c.cp or 1, c.ep or 1
  local sp = t > 1 and o.sequence_parallel ~= false
  local bp = bytes_per(o.precision)
  local counts = plan.param_counts(m)
  -- ---- memory per GPU (the busiest pipeline stage) ----
  local layers_here = ceil_div(L, p)
  local frac = layers_here / L
  local sharded = (counts.attention + counts.mlp / ep + counts.router) * frac / t
  local psi = sharded + counts.replicated * frac
  if p == 1 then psi = psi + (counts.embedding + counts.head) / t
  else psi = psi + math.max(counts.embedding, counts.head) / t end -- first or last stage
  r.params_per_gpu = psi
  local zero, dz = c.zero or 0, d * cp -- ZeRO shards over the data-parallel ranks (and CP)
  r.mem_params = bp.p * psi / (zero >= 3 and dz or 1)
  r.mem_grads = bp.g * psi / (zero >= 2 and dz or 1)
  r.mem_optimizer = bp.k * psi / (zero >= 1 and dz or 1)
  local microbatches = o.global_batch // (d * c.mb)
  r.microbatches = microbatches
  local in_flight = math.min(microbatches, p)
  local inter = (c.v or 1) > 1 and (1 + (p - 1) / (p * c.v)) or 1
  local act_layer = plan.activation_bytes_per_layer(m, o, c.mb, s / cp, t, c.recompute, sp) * (bp.p / 2)
  r.mem_activations = act_layer * layers_here * in_flight * inter
  r.mem_buffers = (o.workspace or 2 ^ 30) + 4 * c.mb * s / cp * V / t -- fp32 logits of a micro-batch
  r.mem_total = r.mem_params + r.mem_grads + r.mem_optimizer + r.mem_activations + r.mem_buffers
  r.fits = r.mem_total <= gpu.hbm * (o.memory_fraction or 1)
  if not r.fits then
    r.why = string.format("needs %.1f GB per GPU, has %.0f GB (over by %.1f GB)", r.mem_total / 1e9, gpu.hbm / 1e9,
      (r.mem_total - gpu.hbm) / 1e9)
  end
  -- ---- traffic per GPU per step (wire bytes, ring algorithms) ----
  local act = c.mb * (s / cp) * h * bp.p -- one [b, s, h] activation of a micro-batch
  local ring = function(k) return k > 1 and (k - 1) / k or 0 end
  local tp_per_layer = 4 + (c.recompute == "full" and 2 or 0) -- AR fwd x2, bwd x2 (+ recompute)
  r.bytes_tp = t > 1 and (tp_per_layer * layers_here + 2) * microbatches * 2 * ring(t) * act
      + 3 * microbatches * c.mb * s / cp * 4 * 2 * ring(t) or 0
  local grad_bytes = bp.g * psi
  r.bytes_dp = dz > 1 and 2 * ring(dz) * grad_bytes * (zero >= 3 and 1.5 or 1) or 0
  r.bytes_pp = p > 1 and 2 * microbatches * act / (sp and t or 1) * (c.v or 1) or 0
  local moe_layers = m.experts and layers_here or 0
  -- dispatch and combine, forward and backward: four all-to-alls per MoE layer
  r.bytes_ep = moe_layers * 4 * microbatches * plan.ep_all_to_all_bytes(c.mb * (s / cp), h, m.top_k, ep, bp.p)
  local kv_act = c.mb * (s / cp) * (m.kv_heads or m.heads) * (h // m.heads) * bp.p * 2
  r.bytes_cp = cp > 1 and layers_here * 3 * microbatches * ring(cp) * kv_act * cp or 0
  -- ---- time ----
  local tokens = o.global_batch * s -- s is a float: so is everything derived
  local mflops = plan.model_flops(m, tokens, s)
  local hw = mflops
  if c.recompute == "full" then hw = mflops * 4 / 3
  elseif c.recompute == "selective" then hw = mflops + 4 * L * h * s * tokens / 3 end
  r.model_flops, r.hardware_flops = mflops, hw
  local peak = (o.precision == "fp8" and gpu.fp8) or gpu.bf16
  local eff = o.efficiency or 0.55
  local gpus = d * t * p * cp
  r.compute_s = hw / gpus / (peak * eff)
  local intra = function(k) return k <= gpu.per_node end
  local lat = o.latency or 10e-6
  local bw_tp = intra(t) and gpu.nvlink or gpu.network
  r.t_tp = t > 1 and r.bytes_tp / bw_tp + lat * (tp_per_layer * layers_here + 2) * microbatches or 0
  local bw_dp = (t * p * cp * d <= gpu.per_node) and gpu.nvlink or gpu.network
  r.t_dp = dz > 1 and r.bytes_dp / bw_dp + lat * 2 * math.log(dz, 2) or 0
  r.t_pp = p > 1 and r.bytes_pp / gpu.network + lat * 2 * microbatches * (c.v or 1) or 0
  r.t_ep = ep > 1 and r.bytes_ep / (intra(ep * t) and gpu.nvlink or gpu.network) or 0
  r.t_cp = cp > 1 and r.bytes_cp / (intra(cp * t) and gpu.nvlink or gpu.network) or 0
  r.bubble = p > 1 and (p - 1) / ((c.v or 1) * microbatches) or 0
  local dp_exposed = math.max(r.t_dp - (1 - (o.dp_exposed or 0.2)) * r.compute_s * 2 / 3, (o.dp_exposed or 0.2) * r.t_dp)
  r.comm_exposed = r.t_tp + r.t_ep + r.t_cp + r.t_pp * 0.5 + dp_exposed
  r.step_s = r.compute_s * (1 + r.bubble) + r.comm_exposed
  r.mfu = mflops / (r.step_s * gpus * peak)
  r.hfu = hw / (r.step_s * gpus * peak)
  r.tokens_per_s = tokens / r.step_s
  r.comm_share = r.comm_exposed / r.step_s
  return r
end

-- ---- enumeration ----

local function divisors(n, limit)
  local out = {}
  for k = 1, math.min(n, limit or n) do if n % k == 0 then out[#out + 1] = k end end
  return out
end

local function resolve(o)
  local m = type(o.model) == "table" and copy(o.model) or copy(presets.models[o.model or ""])
  if not next(m) then error("plan: unknown model '" .. tostring(o.model) .. "' (a preset name or a table)", 3) end
  for _, k in ipairs({ "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "top_k" }) do
    if o[k] then m[k] = o[k] end
  end
  for _, k in ipairs({ "layers", "hidden", "heads", "vocab" }) do
    if type(m[k]) ~= "number" then
      error(string.format("plan: the model needs %s (a number); a custom model gives layers, hidden, heads, vocab "
        .. "and optionally kv_heads, ffn, gated, tied, experts, top_k", k), 3)
    end
  end
  m.kv_heads = m.kv_heads or m.heads
  m.ffn = m.ffn or 4 * m.hidden
  local g = type(o.gpu) == "table" and copy(o.gpu) or copy(presets.gpus[o.gpu or "h100"])
  if not next(g) then error("plan: unknown gpu '" .. tostring(o.gpu) .. "'", 3) end
  for _, k in ipairs({ "bf16", "fp8", "hbm", "hbm_bw", "nvlink", "network", "per_node" }) do
    if o["gpu_" .. k] then g[k] = o["gpu_" .. k] end
  end
  return m, g
end

local function list_of(v, default)
  if v == nil then return default end
  if type(v) == "table" then return v end
  return { v }
end

-- plan{...} -> {best first}, {infeasible}
function plan.enumerate(o)
  local m, gpu = resolve(o)
  local N = assert(o.gpus, "plan: gpus is required")
  assert(o.global_batch and o.seq, "plan: global_batch (sequences) and seq are required")
  local results, rejected = {}, {}
  local tps = list_of(o.tp, divisors(N, o.allow_cross_node_tp and N or gpu.per_node))
  local pps = list_of(o.pp, divisors(N))
  local cps = list_of(o.cp, { 1 })
  local eps = list_of(o.ep, m.experts and divisors(m.experts) or { 1 })
  local zeros = list_of(o.zero, { 0, 1, 2, 3 })
  local mbs = list_of(o.micro_batch, { 1, 2, 4, 8 })
  local recs = list_of(o.recompute, { "none", "selective", "full" })
  local vs = list_of(o.vpp, { 1, 2, 4 })
  for _, t in ipairs(tps) do
    for _, p in ipairs(pps) do
      for _, cp in ipairs(cps) do
        local rest = N // (t * p * cp)
        local reason
        if N % (t * p * cp) ~= 0 then reason = string.format("tp %d x pp %d x cp %d does not divide %d GPUs", t, p, cp, N)
        elseif m.heads % t ~= 0 or m.kv_heads % t ~= 0 and t % m.kv_heads ~= 0 then
          reason = string.format("%d heads (%d kv) do not split over tp %d", m.heads, m.kv_heads, t)
        elseif p > m.layers then reason = string.format("pp %d exceeds %d layers", p, m.layers) end
        if reason then
          rejected[#rejected + 1] = { tp = t, pp = p, cp = cp, why = reason }
        else
          local d = rest
          for _, ep in ipairs(eps) do
            if d % ep == 0 then
              for _, zero in ipairs(zeros) do
                for _, mb in ipairs(mbs) do
                  if o.global_batch % (d * mb) == 0 then
                    for _, rec in ipairs(recs) do
                      for _, v in ipairs(vs) do
                        if v == 1 or (p > 1 and (m.layers // p) % v == 0) then
                          local r = plan.evaluate(m, gpu, o, { dp = d, tp = t, pp = p, cp = cp, ep = ep, zero = zero, mb = mb,
                            recompute = rec, v = v })
                          if r.fits then results[#results + 1] = r else rejected[#rejected + 1] = r end
                        end
                      end
                    end
                  else
                    rejected[#rejected + 1] = { tp = t, pp = p, cp = cp, dp = d, mb = mb,
                      why = string.format("global batch %d does not divide into dp %d x micro-batch %d", o.global_batch, d, mb) }
                  end
                end
              end
            end
          end
        end
      end
    end
  end
  -- fastest first; among equally fast layouts (within 0.1%) the one needing less memory
  table.sort(results, function(a, b)
    if math.abs(a.step_s - b.step_s) > 1e-3 * math.min(a.step_s, b.step_s) then return a.step_s < b.step_s end
    return a.mem_total < b.mem_total
  end)
  return results, rejected, m, gpu
end

local function layout(r)
  local s = string.format("dp%d tp%d pp%d", r.dp, r.tp, r.pp)
  if (r.cp or 1) > 1 then s = s .. " cp" .. r.cp end
  if (r.ep or 1) > 1 then s = s .. " ep" .. r.ep end
  if (r.v or 1) > 1 then s = s .. " v" .. r.v end
  return s
end
plan.layout = layout

local function gb(x) return x / 1e9 end

-- why the winner wins: the factor where it beats the runner-up most
local function why_best(a, b)
  if not b then return "it is the only layout that fits" end
  local reasons = {}
  if a.bubble < b.bubble - 0.01 then reasons[#reasons + 1] = string.format("a smaller pipeline bubble (%.0f%% vs %.0f%%)", 100 * a.bubble, 100 * b.bubble) end
  if a.comm_exposed < b.comm_exposed * 0.9 then reasons[#reasons + 1] = string.format("less exposed communication (%.0f ms vs %.0f ms)", a.comm_exposed * 1e3, b.comm_exposed * 1e3) end
  if a.hardware_flops < b.hardware_flops * 0.99 then reasons[#reasons + 1] = "less recomputation" end
  if #reasons == 0 then reasons[1] = string.format("a shorter step (%.0f ms vs %.0f ms)", a.step_s * 1e3, b.step_s * 1e3) end
  return "over " .. layout(b) .. " (zero " .. b.zero .. ", mb " .. b.mb .. ", " .. b.recompute .. "): " .. table.concat(reasons, ", ")
end

-- prints the ranked table; returns the results (best first)
function plan.run(o)
  local results, rejected, m, gpu = plan.enumerate(o)
  local top = o.top or 10
  local counts = plan.param_counts(m)
  local fmt = o.format or "table"
  if fmt == "csv" then
    print("layout,dp,tp,pp,cp,ep,v,zero,micro_batch,recompute,mem_gb,params_gb,grads_gb,optimizer_gb,activations_gb,buffers_gb,tp_bytes,dp_bytes,pp_bytes,ep_bytes,cp_bytes,step_s,bubble,mfu,tokens_per_s")
    for i = 1, math.min(#results, o.top or #results) do
      local r = results[i]
      print(string.format("%s,%d,%d,%d,%d,%d,%d,%d,%d,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.0f,%.0f,%.0f,%.0f,%.0f,%.4f,%.4f,%.4f,%.0f",
        layout(r), r.dp, r.tp, r.pp, r.cp or 1, r.ep or 1, r.v or 1, r.zero, r.mb, r.recompute, gb(r.mem_total), gb(r.mem_params),
        gb(r.mem_grads), gb(r.mem_optimizer), gb(r.mem_activations), gb(r.mem_buffers), r.bytes_tp, r.bytes_dp, r.bytes_pp,
        r.bytes_ep, r.bytes_cp, r.step_s, r.bubble, r.mfu, r.tokens_per_s))
    end
    return results, rejected
  end
  if fmt == "json" then
    local rows = {}
    for i = 1, math.min(#results, o.top or #results) do
      local r, f = results[i], {}
      for k, v in pairs(r) do
        if type(v) == "number" or type(v) == "string" or type(v) == "boolean" then
          f[#f + 1] = string.format("%q:%s", k, type(v) == "string" and string.format("%q", v) or tostring(v))
        end
      end
      table.sort(f)
      rows[#rows + 1] = "{" .. table.concat(f, ",") .. "}"
    end
    print("[" .. table.concat(rows, ",\n") .. "]")
    return results, rejected
  end
  print(string.format("%s: %.2fB parameters (%.2fB active per token), %d GPUs (%s), global batch %d x %d tokens",
    type(o.model) == "string" and o.model or "model", counts.total / 1e9, counts.active / 1e9, o.gpus,
    type(o.gpu) == "string" and o.gpu or "gpu", o.global_batch, o.seq))
  print(string.format("%d layouts fit, %d do not", #results, #rejected))
  if #results == 0 then
    print("nothing fits; the closest:")
    table.sort(rejected, function(a, b) return (a.mem_total or math.huge) < (b.mem_total or math.huge) end)
    for i = 1, math.min(5, #rejected) do
      local r = rejected[i]
      print(string.format("  %-22s zero %d, mb %d, recompute %-9s %s", r.dp and layout(r) or "", r.zero or 0, r.mb or 1,
        r.recompute or "-", r.why))
    end
    return results, rejected
  end
  print(string.format("%-4s %-20s %4s %3s %-9s %7s %6s %6s %7s %7s %6s %6s %9s", "rank", "layout", "zero", "mb", "recompute",
    "mem GB", "act GB", "bubble", "comm %", "step s", "MFU", "HFU", "tokens/s"))
  for i = 1, math.min(top, #results) do
    local r = results[i]
    print(string.format("%-4d %-20s %4d %3d %-9s %7.1f %6.1f %5.1f%% %6.1f%% %7.2f %5.1f%% %5.1f%% %9.0f", i, layout(r), r.zero, r.mb,
      r.recompute, gb(r.mem_total), gb(r.mem_activations), 100 * r.bubble, 100 * r.comm_share, r.step_s, 100 * r.mfu, 100 * r.hfu,
      r.tokens_per_s))
  end
  -- explain the win against the best layout that is actually different
  local rival
  for i = 2, #results do
    if layout(results[i]) ~= layout(results[1]) then rival = results[i] break end
  end
  print(string.format("best: %s (zero %d, micro-batch %d, recompute %s) wins %s", layout(results[1]), results[1].zero,
    results[1].mb, results[1].recompute, why_best(results[1], rival)))
  if o.infeasible then
    print("\nlayouts that do not work, and why (first " .. math.min(#rejected, 20) .. "):")
    for i = 1, math.min(20, #rejected) do
      local r = rejected[i]
      print(string.format("  %-22s %s", r.dp and (layout(r) .. " zero" .. (r.zero or 0) .. " mb" .. (r.mb or 1)) or
        string.format("tp%d pp%d cp%d", r.tp, r.pp, r.cp or 1), r.why))
    end
  end
  if o.explain then plan.explain(results[1], m, gpu, o) end
  return results, rejected
end

-- the arithmetic of one configuration, line by line
function plan.explain(r, m, gpu, o)
  local c = plan.param_counts(m)
  local bp = bytes_per(o.precision)
  print(string.format("\nexplain %s zero %d micro-batch %d recompute %s:", layout(r), r.zero, r.mb, r.recompute))
  print(string.format("  parameters: %.3fB total; this GPU holds %.3fB (layers/pp, matrices/tp, experts/ep)", c.total / 1e9, r.params_per_gpu / 1e9))
  print(string.format("  params     %d B x %.3fB %s= %.2f GB", bp.p, r.params_per_gpu / 1e9, r.zero >= 3 and "/ dp " or "", gb(r.mem_params)))
  print(string.format("  grads      %d B x %.3fB %s= %.2f GB", bp.g, r.params_per_gpu / 1e9, r.zero >= 2 and "/ dp " or "", gb(r.mem_grads)))
  print(string.format("  optimizer  %d B x %.3fB %s= %.2f GB", bp.k, r.params_per_gpu / 1e9, r.zero >= 1 and "/ dp " or "", gb(r.mem_optimizer)))
  print(string.format("  activations: %.2f GB (Korthikanti per-layer formula x %d layers x %d micro-batches in flight)",
    gb(r.mem_activations), math.ceil(m.layers / r.pp), math.min(r.microbatches, r.pp)))
  print(string.format("  buffers %.2f GB; total %.2f GB of %.0f GB", gb(r.mem_buffers), gb(r.mem_total), gpu.hbm / 1e9))
  print(string.format("  model FLOPs per step 6 N T + 12 L h s T = %.3e; with recomputation %.3e", r.model_flops, r.hardware_flops))
  print(string.format("  compute: %.3e / %d GPUs / (%.0f TFLOP/s x %.2f) = %.3f s", r.hardware_flops, r.dp * r.tp * r.pp * (r.cp or 1),
    ((o.precision == "fp8" and gpu.fp8) or gpu.bf16) / 1e12, o.efficiency or 0.55, r.compute_s))
  print(string.format("  bubble (p-1)/(v m) = (%d-1)/(%d x %d) = %.3f", r.pp, r.v or 1, r.microbatches, r.bubble))
  print(string.format("  traffic per GPU: tp %.2f GB, dp %.2f GB, pp %.2f GB, ep %.2f GB, cp %.2f GB", gb(r.bytes_tp), gb(r.bytes_dp),
    gb(r.bytes_pp), gb(r.bytes_ep), gb(r.bytes_cp)))
  print(string.format("  exposed communication %.3f s (tp %.3f, dp %.3f of which 80%% hidden behind backward, pp %.3f)",
    r.comm_exposed, r.t_tp, r.t_dp, r.t_pp))
  print(string.format("  step %.3f s x (1 + bubble) + comm = %.3f s; MFU %.1f%%, %.0f tokens/s", r.compute_s, r.step_s, 100 * r.mfu, r.tokens_per_s))
end

-- `llmlab --plan key=value ...`: numbers become numbers, a,b,c become lists
function plan.cli(args)
  local o = {}
  for _, a in ipairs(args) do
    local k, v = a:match("^%-*([%w_]+)=(.*)$")
    if not k then
      if a == "--csv" or a == "csv" then o.format = "csv"
      elseif a == "--json" or a == "json" then o.format = "json"
      elseif a == "explain" or a == "--explain" then o.explain = true
      elseif a == "infeasible" or a == "--infeasible" then o.infeasible = true
      else error("plan: arguments are key=value, got " .. a, 0) end
    else
      if v:find(",") then
        local list = {}
        for item in v:gmatch("[^,]+") do list[#list + 1] = tonumber(item) or item end
        o[k] = list
      elseif v == "true" or v == "false" then o[k] = v == "true"
      else o[k] = tonumber(v) or v end
    end
  end
  return plan.run(o)
end

setmetatable(plan, { __call = function(_, o) return plan.run(o) end })
return plan
