-- lab.plan: "what if" for parallel training configurations far beyond this machine.
--
--   lab.plan{model='llama3-70b', gpus=1024, gpu='h100', global_batch=1024, seq=8192}
--   llmlab --plan model=llama3-70b gpus=1024 gpu=h100 global_batch=1024 seq=8192
--
-- It enumerates dp x tp x pp x cp x ep, ZeRO stage, micro-batch, activation recomputation
-- (none, selective, full) and interleaved pipeline chunks (every v the layers split into,
-- evenly or with one layer fewer on the first and last stage as Llama 3); keeps the
-- layouts that divide and fit in memory; and ranks them by step time. The rest lives in:
--   plan_memory.lua     parameter counts, model and hardware FLOPs, pipeline stages, bytes
--                       per GPU (parameters, gradients, optimizer states, activations)
--   plan_time.lua       a roofline per operation from the GEMM shapes, the attention kernel
--                       and element-wise passes against the GPU's peak and HBM bandwidth;
--                       TP/CP/EP/PP/DP traffic and how much of it is exposed; MFU and HFU
--   plan_check.lua      argument checks, errors that name the rank and the value
--   plan_presets.lua    models, GPUs, the cited terms of the time the roofline does not
--                       see, and the free parameters (fractions of peak, two constants)
--   plan_published.lua  the published runs; plan_fit.lua their leave-one-source-out fit
--   plan_explain.lua    the arithmetic of one answer, line by line
--   plan_helpers.lua    the public formula helpers (tp_bytes, stages, ...), checked
-- This file is the API: the bounded enumeration, the printed answers
-- and their ranges where an assumption is weak.
-- Assumptions (all overridable): bf16 weights and gradients with fp32 Adam states (16
-- bytes per parameter before ZeRO), flash attention, sequence parallelism with TP, data-
-- parallel reductions overlapped with the last micro-batch's backward, TP/CP/EP
-- collectives exposed, balanced experts (expert_load = 1), 1 GiB of workspace per GPU.
local presets = require("lab.plan_presets")
local mem = require("lab.plan_memory")
local time = require("lab.plan_time")
local check = require("lab.plan_check")
local fail, need, is_int, is_num, copy = check.fail, check.need, check.is_int, check.is_num, check.copy
local check_model, model_arg = check.model, check.model_arg
local positive_integer, int_list, word_list = check.positive_integer, check.int_list, check.word_list
local plan = {}

-- the public helpers (plan_helpers.lua): formulas with their arguments checked
for k, f in pairs(require("lab.plan_helpers")) do plan[k] = f end

-- ---- one configuration ----

-- Evaluates one layout; returns a table with .fits, .why (when not), memory, traffic,
-- time, mfu, hfu. c: {dp, tp, pp, cp, ep, zero, mb, recompute, v}; lt: the layer's times
-- when the caller has them already (they depend on tp, cp, ep, mb and recompute only).
-- The enumeration calls it with checked arguments; plan.evaluate checks them first.
local function evaluate(m, gpu, o, c, lt)
  gpu = time.with_defaults(gpu)
  if not m.kv_heads or not m.ffn then
    m = copy(m)
    m.kv_heads, m.ffn = m.kv_heads or m.heads, m.ffn or 4 * m.hidden
  end
  local r = copy(c)
  r.cp, r.ep, r.v = c.cp or 1, c.ep or 1, c.v or 1
  local st, why = mem.stages(m.layers, c.pp, r.v)
  if not st then r.fits, r.why = false, why return r end
  r.uneven = st.deficit > 0
  r.microbatches = o.global_batch // (c.dp * c.mb)
  mem.account(m, gpu, o, r, r, st)
  -- traffic per GPU per step, on the rank that holds the most layers
  r.bytes_tp = time.tp_bytes(m, o, r, st.middle)
  r.bytes_dp = time.dp_bytes(o, r, r.params_per_gpu)
  r.bytes_pp = time.pp_bytes(m, o, r)
  r.bytes_ep = time.ep_bytes(m, o, r, m.experts and st.middle or 0)
  r.bytes_cp = time.cp_bytes(m, o, r, st.middle)
  time.step(m, gpu, o, r, r, lt or time.layer(m, gpu, o, r), st)
  return r
end

function plan.evaluate(m, gpu, o, c, lt)
  check_model(m)
  if type(gpu) ~= "table" or type(gpu.bf16) ~= "number" or type(gpu.hbm) ~= "number" then
    fail("evaluate: the gpu is a table with bf16 (FLOP/s) and hbm (bytes) at least")
  end
  if type(o) ~= "table" or type(c) ~= "table" then fail("evaluate(model, gpu, options, layout): options and layout are tables") end
  for _, k in ipairs({ "seq", "global_batch" }) do
    if math.type(o[k]) ~= "integer" or o[k] < 1 then fail("evaluate: options.%s must be a positive integer, got %s", k, tostring(o[k])) end
  end
  for _, k in ipairs({ "dp", "tp", "pp", "mb", "cp", "ep", "v", "zero" }) do
    local v = c[k]
    if (v ~= nil or k == "dp" or k == "tp" or k == "pp" or k == "mb") and (math.type(v) ~= "integer" or v < (k == "zero" and 0 or 1)) then
      fail("evaluate: layout.%s must be a positive integer, got %s", k, tostring(v))
    end
  end
  if o.global_batch < c.dp * c.mb then
    fail("evaluate: global batch %d is less than dp %d x micro-batch %d", o.global_batch, c.dp, c.mb)
  end
  -- the free terms' fitted values unless the options set them, as plan{...} does
  local q = copy(o)
  for k, v in pairs(presets.free_options()) do if q[k] == nil then q[k] = v end end
  return evaluate(m, gpu, q, c, lt)
end

-- ---- enumeration ----

local MAX_GPUS = 1 << 20 -- a million GPUs: beyond any cluster, and the enumeration stays quick
local MAX_LAYOUTS = 2000000

-- divisors of n up to limit, ascending, by trial division up to sqrt(n)
local function divisors(n, limit)
  local lo, hi = {}, {}
  local k = 1
  while k * k <= n do
    if n % k == 0 then
      lo[#lo + 1] = k
      if k * k ~= n then table.insert(hi, 1, n // k) end
    end
    k = k + 1
  end
  local out = {}
  for _, x in ipairs(lo) do if x <= (limit or n) then out[#out + 1] = x end end
  for _, x in ipairs(hi) do if x <= (limit or n) then out[#out + 1] = x end end
  return out
end

-- the preset name nearest to a mistyped one (edit distance), for "did you mean" (issue 27)
local function nearest(name, names)
  local function distance(a, b)
    local prev = {}
    for j = 0, #b do prev[j] = j end
    for i = 1, #a do
      local cur = { [0] = i }
      for j = 1, #b do
        cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:sub(i, i) == b:sub(j, j) and 0 or 1))
      end
      prev = cur
    end
    return prev[#b]
  end
  local best, bd
  for k in pairs(names) do
    local d = distance(tostring(name):lower(), k:lower())
    if not bd or d < bd or (d == bd and k < best) then best, bd = k, d end
  end
  return best and bd <= math.max(2, #tostring(name) // 3) and best or nil
end

local sorted_names = require("lab.sorted_keys")

local function resolve(o)
  if type(o) ~= "table" then fail("expected a table of options {model=, gpus=, gpu=, global_batch=, seq=}, got %s", type(o)) end
  local m = type(o.model) == "table" and copy(o.model) or copy(presets.models[o.model or ""])
  if not next(m) then
    local near = o.model ~= nil and nearest(o.model, presets.models)
    fail("unknown model '%s' (a preset name or a table)%s", tostring(o.model),
      near and ("; did you mean " .. near .. "?") or ("; presets: " .. table.concat(sorted_names(presets.models), ", ")))
  end
  for _, k in ipairs({ "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "top_k", "head_dim" }) do
    if o[k] then m[k] = o[k] end
  end
  check_model(m)
  m.kv_heads = m.kv_heads or m.heads
  m.ffn = m.ffn or 4 * m.hidden
  local g = type(o.gpu) == "table" and copy(o.gpu) or copy(presets.gpus[o.gpu or "h100"])
  if not next(g) then
    local near = nearest(o.gpu, presets.gpus)
    fail("unknown gpu '%s'%s", tostring(o.gpu),
      near and ("; did you mean " .. near .. "?") or ("; presets: " .. table.concat(sorted_names(presets.gpus), ", ")))
  end
  for _, k in ipairs({ "bf16", "fp8", "hbm", "hbm_bw", "nvlink", "network", "per_node", "sms", "gemm", "gemm_fp8", "attention", "memory" }) do
    if o["gpu_" .. k] then g[k] = o["gpu_" .. k] end
  end
  if o.efficiency then g.gemm = o.efficiency end -- the old single knob: the achievable GEMM fraction
  if type(g.bf16) ~= "number" or type(g.hbm) ~= "number" then fail("the gpu table needs bf16 (FLOP/s) and hbm (bytes)") end
  if o.gpu_generation ~= nil then g.generation = o.gpu_generation end
  if g.generation ~= nil and g.generation ~= "a100" and g.generation ~= "h100" then
    fail("gpu generation is a100 or h100 (whose fractions of peak and kernel speeds it takes), got %s", tostring(g.generation))
  end
  for k, v in pairs(g) do
    if k ~= "generation" and (type(v) ~= "number" or not (v > 0) or v == math.huge) then fail("gpu %s must be a positive number, got %s", k, tostring(v)) end
  end
  for _, k in ipairs({ "gemm", "gemm_fp8", "attention", "memory" }) do
    if g[k] and g[k] > 1 then fail("gpu %s is a fraction of peak (at most 1), got %s", k, tostring(g[k])) end
  end
  if g.per_node and math.type(g.per_node) ~= "integer" then fail("gpu per_node must be an integer, got %s", tostring(g.per_node)) end
  if o.precision == "fp8" and not g.fp8 then fail("precision fp8: this GPU has no fp8 peak (gpu_fp8=...)") end
  return m, g
end

-- plan{...} -> {best first}, {infeasible}, model, gpu
function plan.enumerate(o)
  local m, gpu = resolve(o)
  local N = positive_integer(o, "gpus", MAX_GPUS)
  if o.global_batch == nil or o.seq == nil then fail("global_batch (sequences) and seq are required") end
  local B = positive_integer(o, "global_batch", 1 << 40)
  local S = positive_integer(o, "seq", 1 << 24)
  local q = copy(o)
  q.gpus, q.global_batch, q.seq = N, B, S
  -- MoE: the busiest expert rank's load over the mean. Dropless routing does what the
  -- imbalance asks (expert_imbalance, 1 = balanced); a capacity factor pads every expert
  -- to capacity x mean and drops the tokens beyond it
  if m.experts then
    for _, k in ipairs({ "expert_imbalance", "capacity_factor" }) do
      if o[k] ~= nil and (type(o[k]) ~= "number" or o[k] < 1 or o[k] ~= o[k] or o[k] > m.experts) then
        fail("%s must be a number from 1 to %d (the experts), got %s", k, m.experts, tostring(o[k]))
      end
    end
    q.expert_load = o.capacity_factor or o.expert_imbalance or 1
  end
  o = q
  local results, rejected = {}, {}
  if o.precision ~= nil then word_list(o, "precision", nil, { "bf16", "fp8", "f32" }) end
  if o.attention ~= nil then word_list(o, "attention", nil, { "flash", "materialized" }) end
  if o.attention_kernel ~= nil then word_list(o, "attention_kernel", nil, { "fa1", "fa2", "fa3", "cudnn", "triton" }) end
  if o.reduce_dtype ~= nil then word_list(o, "reduce_dtype", nil, { "bf16", "fp32" }) end
  -- the free terms' fitted values (plan_presets.free) unless the question sets them
  for k, v in pairs(presets.free_options()) do if o[k] == nil then o[k] = v end end
  local cp_from = o.cp_from ~= nil and positive_integer(o, "cp_from", 1 << 24) or 16384
  -- the numeric knobs: name, smallest, largest (a fraction excludes 0 where it divides)
  for _, k in ipairs({ { "memory_fraction", 1e-9, 1 }, { "workspace", 0, 1e15 }, { "latency", 0, 1 },
    { "bus_efficiency", 1e-9, 1 }, { "tp_overlap", 0, 1 }, { "efficiency", 1e-9, 1 }, { "layer_overhead", 0, 1 },
    { "contention", 0, 1 }, { "triton_hopper", 1e-9, 2 } }) do
    local v = o[k[1]]
    if v ~= nil and (type(v) ~= "number" or not (v >= k[2] and v <= k[3])) then
      fail("%s must be a number from %g to %g, got %s", k[1], k[2], k[3], tostring(v))
    end
  end
  for _, k in ipairs({ "dp_overlap", "param_gather_overlap", "sequence_parallel", "allow_cross_node_tp", "pp_blocking",
    "grad_predivide" }) do
    if o[k] ~= nil and type(o[k]) ~= "boolean" then fail("%s must be true or false, got %s", k, tostring(o[k])) end
  end
  local tps = int_list(o, "tp", divisors(N, o.allow_cross_node_tp and N or gpu.per_node), 1, MAX_GPUS)
  local pps = int_list(o, "pp", divisors(N, m.layers), 1, MAX_GPUS)
  -- context parallelism is considered by itself for long sequences: degrees that leave
  -- each rank two balanced chunks of at least 1024 tokens (Llama 3: 2 x cp chunks)
  local cps = int_list(o, "cp", S >= cp_from and (function()
    local out = {}
    for _, k in ipairs(divisors(N, 64)) do if S % (2 * k) == 0 and S // k >= 1024 then out[#out + 1] = k end end
    return out
  end)() or { 1 }, 1, MAX_GPUS)
  local eps = int_list(o, "ep", m.experts and divisors(m.experts) or { 1 }, 1, MAX_GPUS)
  local zeros = int_list(o, "zero", { 0, 1, 2, 3 }, 0, 3)
  local mbs = int_list(o, "micro_batch", { 1, 2, 4, 8 }, 1, 1 << 20)
  local materialized = (o.attention or "flash") == "materialized"
  -- with flash attention there are no stored scores for selective recomputation to drop
  local recs = word_list(o, "recompute", materialized and { "none", "selective", "full" } or { "none", "full" },
    { "none", "selective", "full" })
  local budget = #tps * #pps * #cps * #eps * #zeros * #mbs * #recs
  if budget > MAX_LAYOUTS then
    fail("%d GPUs give %d combinations before pipeline chunks; narrow them (tp=, pp=, cp=, zero=, micro_batch=)", N, budget)
  end
  local evaluated = 0
  local cache = {}
  for _, t in ipairs(tps) do
    for _, p in ipairs(pps) do
      for _, cp in ipairs(cps) do
        local reason
        if N % (t * p * cp) ~= 0 then reason = string.format("tp %d x pp %d x cp %d does not divide %d GPUs", t, p, cp, N)
        elseif m.heads % t ~= 0 or m.kv_heads % t ~= 0 and t % m.kv_heads ~= 0 then
          reason = string.format("%d heads (%d kv) do not split over tp %d", m.heads, m.kv_heads, t)
        elseif p > m.layers then reason = string.format("pp %d exceeds %d layers", p, m.layers)
        elseif S % cp ~= 0 then reason = string.format("seq %d does not split over cp %d", S, cp) end
        local vs = int_list(o, "vpp", nil, 1, m.layers)
        if not vs then
          vs = {}
          for v = 1, (p > 1 and m.layers // p + 1 or 1) do
            if mem.stages(m.layers, p, v) then vs[#vs + 1] = v end
          end
        end
        if not reason and #vs == 0 then reason = string.format("%d layers do not split over pp %d", m.layers, p) end
        if reason then
          rejected[#rejected + 1] = { tp = t, pp = p, cp = cp, why = reason }
        else
          local d = N // (t * p * cp)
          for _, ep in ipairs(eps) do
            -- experts over ep ranks of the data-parallel group, each expert split over tp as
            -- the layer (expert tensor parallel = tp); or, when ep does not divide dp but
            -- divides tp x dp, over tp x dp ranks with whole experts (Megatron-Core's expert
            -- tensor parallel 1: the experts' ranks span the TP group)
            local etp1 = d % ep ~= 0 and t > 1 and (d * t) % ep == 0 or nil
            if d % ep == 0 or etp1 then
              for _, mb in ipairs(mbs) do
                if B % (d * mb) == 0 then
                  for _, rec in ipairs(recs) do
                    local key = table.concat({ t, cp, ep, mb, rec, etp1 and 1 or 0 }, ",")
                    cache[key] = cache[key] or time.layer(m, time.with_defaults(gpu), o,
                      { tp = t, cp = cp, ep = ep, mb = mb, recompute = rec, etp1 = etp1 })
                    for _, zero in ipairs(zeros) do
                      for _, v in ipairs(vs) do
                        evaluated = evaluated + 1
                        if evaluated > MAX_LAYOUTS then
                          fail("more than %d layouts for %d GPUs; narrow them (tp=, pp=, vpp=, zero=, micro_batch=)", MAX_LAYOUTS, N)
                        end
                        local r = evaluate(m, gpu, o, { dp = d, tp = t, pp = p, cp = cp, ep = ep, zero = zero, mb = mb,
                          recompute = rec, v = v, etp1 = etp1 }, cache[key])
                        if r.fits then results[#results + 1] = r else rejected[#rejected + 1] = r end
                      end
                    end
                  end
                else
                  rejected[#rejected + 1] = { tp = t, pp = p, cp = cp, dp = d, mb = mb,
                    why = string.format("global batch %d does not divide into dp %d x micro-batch %d", B, d, mb) }
                end
              end
            end
          end
        end
      end
    end
  end
  -- fastest first; among equally fast layouts (within 0.1%) the simpler schedule (fewer
  -- pipeline chunks, even stages), then the one needing less memory
  table.sort(results, function(a, b)
    if math.abs(a.step_s - b.step_s) > 1e-3 * math.min(a.step_s, b.step_s) then return a.step_s < b.step_s end
    if a.v ~= b.v then return a.v < b.v end
    if a.uneven ~= b.uneven then return not a.uneven end
    return a.mem_total < b.mem_total
  end)
  return results, rejected, m, gpu, o
end

local function layout(r)
  need(type(r) == "table" and is_int(r.dp) and is_int(r.tp) and is_int(r.pp), "layout", "expects a layout {dp=, tp=, pp=, ...}")
  local s = string.format("dp%d tp%d pp%d", r.dp, r.tp, r.pp)
  if (r.cp or 1) > 1 then s = s .. " cp" .. r.cp end
  if (r.ep or 1) > 1 then s = s .. " ep" .. r.ep .. (r.etp1 and " etp1" or "") end
  if (r.v or 1) > 1 then s = s .. " v" .. r.v end
  if r.uneven then s = s .. " uneven" end
  return s
end
plan.layout = layout

local function gb(x) return x / 1e9 end

local function variant(r)
  return string.format("zero %d, mb %d, recompute %s", r.zero, r.mb, r.recompute)
end

-- why the winner wins over b: the factors where it is better
local function reasons(a, b)
  local out = {}
  if a.bubble < b.bubble - 0.01 then out[#out + 1] = string.format("a smaller pipeline bubble (%.0f%% vs %.0f%%)", 100 * a.bubble, 100 * b.bubble) end
  if a.comm_exposed < b.comm_exposed * 0.9 then out[#out + 1] = string.format("less exposed communication (%.0f ms vs %.0f ms)", a.comm_exposed * 1e3, b.comm_exposed * 1e3) end
  if a.hardware_flops < b.hardware_flops * 0.99 then out[#out + 1] = "less recomputation" end
  if #out == 0 then
    if math.abs(a.step_s - b.step_s) <= 1e-3 * math.min(a.step_s, b.step_s) then
      local why = a.v ~= b.v and string.format("fewer pipeline chunks (%d vs %d)", a.v, b.v)
          or a.uneven ~= b.uneven and "even stages"
          or string.format("less memory (%.2f GB vs %.2f GB)", gb(a.mem_total), gb(b.mem_total))
      out[1] = string.format("as fast (%.0f ms vs %.0f ms) with %s", a.step_s * 1e3, b.step_s * 1e3, why)
    else
      out[1] = string.format("a shorter step (%.0f ms vs %.0f ms)", a.step_s * 1e3, b.step_s * 1e3)
    end
  end
  return table.concat(out, ", ")
end

-- one sentence on the winner, against the best layout that is actually different (or,
-- when every layout that fits is the same parallel layout, against its next variant)
local function why_best(results)
  local a = results[1]
  if #results == 1 then return "it is the only layout that fits" end
  for i = 2, #results do
    local b = results[i]
    if layout(b) ~= layout(a) then return "over " .. layout(b) .. " (" .. variant(b) .. "): " .. reasons(a, b) end
  end
  return string.format("all %d layouts that fit are %s; over its next variant (%s): %s", #results, layout(a),
    variant(results[2]), reasons(a, results[2]))
end

-- The range of an answer: the layout r re-evaluated with each alternative the question
-- leaves open, optimistic to pessimistic, combined with the planner's own error out of
-- sample. Open: the attention kernel (when flash attention is not named: Triton's,
-- FlashAttention-2's, or on Hopper FlashAttention-3's) and, across nodes, the network (when
-- gpu_network is not given: the preset's bandwidth or half of it, a cluster with half the
-- NICs or a fabric that delivers half). The model's error: +-plan_presets.model_error on the
-- step time, the 95th percentile of the leave-one-out errors on the published runs
-- (plan_fit.lua). Fills r.step_lo_s, r.step_hi_s, r.mfu_lo, r.mfu_hi, r.model_error,
-- r.step_lo_assumed_s and r.step_hi_assumed_s (the open assumptions alone) and r.range_why
-- (the assumption that moves it most, nil when none is open).
function plan.range(r, m, gpu, q, given)
  need(type(r) == "table" and type(r.step_s) == "number" and is_int(r.dp) and is_int(r.tp) and is_int(r.pp), "range",
    "the first argument is a result of plan.enumerate or plan.evaluate")
  check_model(m)
  need(type(gpu) == "table" and type(gpu.bf16) == "number" and type(gpu.hbm) == "number", "range",
    "the gpu is a table with bf16 (FLOP/s) and hbm (bytes)")
  need(type(q) == "table" and is_int(q.seq) and is_int(q.global_batch) and is_int(q.gpus), "range",
    "options need seq, global_batch and gpus (the fifth value plan.enumerate returns)")
  need(given == nil or type(given) == "table", "range", "the question asked is a table, got %s", type(given))
  given = given or q
  local open = {}
  if (q.attention or "flash") == "flash" and given.attention_kernel == nil then
    local kernels = { "triton", "fa2" }
    if time.with_defaults(gpu).generation == "h100" then kernels[3] = "fa3" end
    open[#open + 1] = { why = "attention kernel not given (attention_kernel=" .. table.concat(kernels, ", ") .. ")",
      alts = (function()
        local out = {}
        for _, k in ipairs(kernels) do out[#out + 1] = { q = { attention_kernel = k } } end
        return out
      end)() }
  end
  if given.gpu_network == nil and q.gpus > (gpu.per_node or 8) then
    open[#open + 1] = { why = "network not given (gpu_network= per GPU: the preset's or half of it)",
      alts = { { g = { network = gpu.network } }, { g = { network = gpu.network / 2 } } } }
  end
  local c = { dp = r.dp, tp = r.tp, pp = r.pp, cp = r.cp, ep = r.ep, zero = r.zero, mb = r.mb, recompute = r.recompute, v = r.v }
  r.step_lo_s, r.step_hi_s, r.range_why = r.step_s, r.step_s, nil
  local widest = 0
  for _, a in ipairs(open) do
    local lo, hi = r.step_s, r.step_s
    for _, alt in ipairs(a.alts) do
      local qq, gg = copy(q), copy(gpu)
      for k, v in pairs(alt.q or {}) do qq[k] = v end
      for k, v in pairs(alt.g or {}) do gg[k] = v end
      local x = evaluate(m, gg, qq, c)
      if x.fits then lo, hi = math.min(lo, x.step_s), math.max(hi, x.step_s) end
    end
    r.step_lo_s, r.step_hi_s = math.min(r.step_lo_s, lo), math.max(r.step_hi_s, hi)
    if hi - lo > widest then widest, r.range_why = hi - lo, a.why end
  end
  local e = presets.model_error
  r.model_error, r.step_lo_assumed_s, r.step_hi_assumed_s = e, r.step_lo_s, r.step_hi_s
  r.step_lo_s, r.step_hi_s = r.step_lo_s * (1 - e), r.step_hi_s * (1 + e)
  r.mfu_lo, r.mfu_hi = r.mfu * r.step_s / r.step_hi_s, r.mfu * r.step_s / r.step_lo_s
  return r
end

-- prints the ranked table; returns the results (best first)
function plan.run(o)
  local results, rejected, m, gpu, q = plan.enumerate(o)
  if results[1] then plan.range(results[1], m, gpu, q, o) end
  if o.top ~= nil and (math.type(o.top) ~= "integer" or o.top < 1) then fail("top must be a positive integer, got %s", tostring(o.top)) end
  if o.format ~= nil and o.format ~= "table" and o.format ~= "csv" and o.format ~= "json" then
    fail("format must be table, csv or json, got %s", tostring(o.format))
  end
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
  print(string.format("%d layout%s, %d do%s not", #results, #results == 1 and " fits" or "s fit", #rejected,
    #rejected == 1 and "es" or ""))
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
  print(string.format("%-4s %-28s %4s %3s %-9s %7s %6s %6s %7s %7s %6s %6s %9s", "rank", "layout", "zero", "mb", "recompute",
    "mem GB", "act GB", "bubble", "comm %", "step s", "MFU", "HFU", "tokens/s"))
  for i = 1, math.min(top, #results) do
    local r = results[i]
    print(string.format("%-4d %-28s %4d %3d %-9s %7.1f %6.1f %5.1f%% %6.1f%% %7.2f %5.1f%% %5.1f%% %9.0f", i, layout(r), r.zero, r.mb,
      r.recompute, gb(r.mem_total), gb(r.mem_activations), 100 * r.bubble, 100 * r.comm_share, r.step_s, 100 * r.mfu, 100 * r.hfu,
      r.tokens_per_s))
  end
  print(string.format("best: %s (%s) wins: %s", layout(results[1]), variant(results[1]), why_best(results)))
  local b = results[1]
  print(string.format("range: step %.2f to %.2f s, MFU %.1f%% to %.1f%%: model error +-%.1f%% (LOSO 95th percentile)%s",
    b.step_lo_s, b.step_hi_s, 100 * b.mfu_lo, 100 * b.mfu_hi, 100 * b.model_error,
    b.range_why and string.format(", open assumptions %.2f to %.2f s driven most by the %s", b.step_lo_assumed_s,
      b.step_hi_assumed_s, b.range_why) or ", no open assumption"))
  if o.plot ~= false then require("lab.plot_plan").draw(results, o, layout) end -- plot=false: the table only
  if o.infeasible then
    print("\nlayouts that do not work, and why (first " .. math.min(#rejected, 20) .. "):")
    for i = 1, math.min(20, #rejected) do
      local r = rejected[i]
      print(string.format("  %-22s %s", r.dp and (layout(r) .. " zero" .. (r.zero or 0) .. " mb" .. (r.mb or 1)) or
        string.format("tp%d pp%d cp%d", r.tp, r.pp, r.cp or 1), r.why))
    end
  end
  if o.explain then plan.explain(results[1], m, gpu, q) end
  return results, rejected
end

-- the arithmetic of one configuration, line by line (plan_explain.lua)
function plan.explain(r, m, gpu, o)
  need(type(r) == "table" and type(r.step_s) == "number" and type(r.act_layer) == "number", "explain",
    "the first argument is a result of plan.enumerate or plan.evaluate")
  check_model(m)
  need(type(gpu) == "table" and type(gpu.bf16) == "number", "explain", "the gpu is a table with bf16 (FLOP/s)")
  need(type(o) == "table" and is_int(o.seq) and is_int(o.global_batch), "explain", "options need seq and global_batch")
  return require("lab.plan_explain")(plan, r, model_arg("explain", m), gpu, o)
end

function plan.show_metric(metric, x)
  need(metric == "mfu" or metric == "hfu" or metric == "tokens" or metric == "tflops", "show_metric",
    "metric is mfu, hfu, tokens or tflops, got %s", tostring(metric))
  need(is_num(x), "show_metric", "the value is a finite number, got %s", tostring(x))
  return require("lab.plan_fit").show(metric, x)
end

-- The planner against published runs (lua/lab/plan_published.lua), validated leave-one-
-- source-out (lua/lab/plan_fit.lua): each source's rows planned with the free parameters
-- fitted on the other sources only. Returns rows {run, best, predicted, error, lo, hi, why}
-- and the fit. format: nil (quiet), "table", or "markdown" (the rows of README.md's table,
-- which tests/lua/single/test_plan.lua compares with this function's answer).
function plan.published(format)
  need(format == nil or format == "table" or format == "markdown", "published", "format is nil, table or markdown, got %s", tostring(format))
  local F = require("lab.plan_fit")
  local fit = F.loso(plan)
  if format then F.print(plan, fit.rows, format, fit) end
  return fit.rows, fit
end

-- `llmlab --plan key=value ...`: numbers become numbers, a,b,c become lists
function plan.cli(args)
  need(type(args) == "table", "cli", "expects a list of key=value strings, got %s", type(args))
  for i, a in ipairs(args) do need(type(a) == "string", "cli", "argument %d is %s, not a string", i, type(a)) end
  if #args == 0 then -- usage and the presets, instead of an error about model 'nil'
    print("usage: llmlab --plan model=NAME gpus=N [gpu=NAME global_batch=N seq=N tp=.. pp=.. ...] [explain] [csv|json]\n" ..
      "       llmlab --plan published   (the planner against published runs)\n" ..
      "e.g.   llmlab --plan model=llama3-70b gpus=1024 gpu=h100\n" ..
      "models: " .. table.concat(sorted_names(presets.models), ", ") .. "\n" ..
      "gpus:   " .. table.concat(sorted_names(presets.gpus), ", "))
    return
  end
  local o = {}
  for _, a in ipairs(args) do
    local k, v = a:match("^%-*([%w_]+)=(.*)$")
    if not k then
      if a == "--csv" or a == "csv" then o.format = "csv"
      elseif a == "--json" or a == "json" then o.format = "json"
      elseif a == "explain" or a == "--explain" then o.explain = true
      elseif a == "infeasible" or a == "--infeasible" then o.infeasible = true
      elseif a == "published" or a == "--published" then o.published = true
      else -- a preset's name without its key (llama3-7b): say which key, with the nearest name
        local model, gpu = nearest(a, presets.models), nearest(a, presets.gpus)
        local hint = model and ("; did you mean model=" .. model .. "?") or gpu and ("; did you mean gpu=" .. gpu .. "?") or ""
        fail("cli: arguments are key=value (or csv, json, explain, infeasible, published), got %s%s", a, hint)
      end
    else
      if v:find(",") then
        local list = {}
        for item in v:gmatch("[^,]+") do list[#list + 1] = tonumber(item) or item end
        o[k] = list
      elseif v == "true" or v == "false" then o[k] = v == "true"
      else o[k] = tonumber(v) or v end
    end
  end
  if o.published then return plan.published(o.format == "csv" and "table" or "markdown") end
  return plan.run(o)
end

setmetatable(plan, { __call = function(_, o) return plan.run(o) end })
return plan
