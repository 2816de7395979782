-- lab.plan's explain: the arithmetic of one configuration printed line by line (memory,
-- FLOPs, one layer's time and the terms the roofline does not see, each with the source
-- plan_presets.terms cites, the pipeline, the traffic and what of it is exposed). plan.lua
-- checks the arguments and calls this with a checked model.
local presets = require("lab.plan_presets")
local mem = require("lab.plan_memory")
local time = require("lab.plan_time")

local function copy(t)
  local o = {}
  for k, v in pairs(t or {}) do o[k] = v end
  return o
end
local function gb(x) return x / 1e9 end
local function variant(r) return string.format("zero %d, mb %d, recompute %s", r.zero, r.mb, r.recompute) end
local layout

return function(plan, r, m, gpu, o)
  layout = plan.layout
  gpu = time.with_defaults(gpu)
  local given = o
  o = copy(given)
  for k, v in pairs(presets.free_options()) do if o[k] == nil then o[k] = v end end
  local c = plan.param_counts(m)
  local bp = mem.bytes_per(o.precision)
  local dz = r.dp * (r.cp or 1)
  print(string.format("\nexplain %s %s:", layout(r), variant(r)))
  print(string.format("  parameters: %.3fB total; the fullest GPU holds %.3fB (%d layers of %d, matrices/tp, experts/ep)",
    c.total / 1e9, r.params_per_gpu / 1e9, r.layers_held, m.layers))
  print(string.format("  params     %d B x %.3fB %s= %.2f GB", bp.p, r.params_per_gpu / 1e9, r.zero >= 3 and "/ dp " or "", gb(r.mem_params)))
  print(string.format("  grads      %d B x %.3fB %s= %.2f GB", bp.g, r.params_per_gpu / 1e9, r.zero >= 2 and "/ dp " or "", gb(r.mem_grads)))
  print(string.format("  optimizer  %d B x %.3fB %s= %.2f GB", bp.k, r.params_per_gpu / 1e9, r.zero >= 1 and "/ dp " or "", gb(r.mem_optimizer)))
  print(string.format("  activations: %.3f GB per layer per micro-batch (Korthikanti, recompute %s) x %d layers x %d micro-batches in flight%s = %.2f GB",
    gb(r.act_layer), r.recompute, r.layers_held, r.in_flight, (r.v or 1) > 1 and string.format(" x (1 + (p-1)/(p v))") or "",
    gb(r.mem_activations)))
  print(string.format("  buffers %.2f GB; total %.2f GB of %.0f GB", gb(r.mem_buffers), gb(r.mem_total), gpu.hbm / 1e9))
  print(string.format("  model FLOPs per step 6 x %.3fB GEMM parameters x T + 12 L q s T = %.3e; executed (recompute %s) %.3e",
    c.matmul / 1e9, r.model_flops, r.recompute, r.hardware_flops))
  local lt = time.layer(m, gpu, o, r)
  print(string.format("  one layer, one micro-batch: GEMMs %.2f ms, attention %.2f ms, element-wise %.2f ms, TP/CP/EP collectives %.2f ms;"
    .. " forward %.2f + backward %.2f + recompute %.2f ms", lt.gemm * 3e3, lt.attention * 1e3, lt.elementwise * 1e3, lt.comm * 1e3,
    lt.fwd * 1e3, lt.bwd * 1e3, lt.rec * 1e3))
  local gf = o.precision == "fp8" and (gpu.gemm_fp8 or gpu.gemm) or gpu.gemm
  print(string.format("  (roofline: GEMMs at %.0f%% of %.0f TFLOP/s where the shapes fill the GPU, streams at %.0f%% of %.1f TB/s;"
    .. " fractions fitted on every published source, plan_presets.free)",
    100 * gf, ((o.precision == "fp8" and gpu.fp8) or gpu.bf16) / 1e12, 100 * gpu.memory, gpu.hbm_bw / 1e12))
  -- the terms the roofline does not see (plan_presets.terms, each with its source)
  local terms = presets.terms
  if lt.attention_fraction then
    local hd = m.head_dim or m.hidden // m.heads
    local kernel = o.attention_kernel or "fa2"
    local sq = o.seq // (r.cp or 1)
    local kf, hf, sf = time.attention_factors(gpu, o, hd, sq)
    print(string.format("  attention: %s kernel at %.0f%% of peak = FlashAttention-2's %.0f%% on %s x kernel %.2f x head dim %d %.2f"
      .. " x %d tokens %.2f (s / (s + %d)); factors read off the FlashAttention-2/3 papers' figures", kernel,
      100 * lt.attention_fraction, 100 * gpu.attention, gpu.generation, kf, hd, hf, sq, sf, terms.attention_seq_knee))
  end
  print(string.format("  collective latency: %.0f us per NVLink ring step, %.0f us per network step, %.0f us launch per call;"
    .. " framework overhead %.0f us per layer per pass (%.3f s a step)", 1e6 * terms.alpha_nvlink, 1e6 * terms.alpha_net,
    1e6 * terms.launch, 1e6 * (o.layer_overhead or 0), (lt.overhead or 0) * r.layers_held * r.microbatches))
  if (r.t_contention or 0) > 0 then
    print(string.format("  overlap contention: compute beside %.3f s of overlapped collectives runs %.0f%% slower: +%.3f s",
      r.t_dp - r.t_dp_exposed, 100 * (o.contention or 0), r.t_contention))
  end
  if (r.t_pp_blocking or 0) > 0 then
    print(string.format("  blocking pipeline transfers: +%.2f ms per micro-batch on the slowest stage (%d transfers of the"
      .. " activation or its gradient, each held by both stages it joins)", 1e3 * r.t_pp_blocking,
      r.pp > 2 and terms.pp_blocking_transfers or 2))
  end
  if (r.t_grad_prep or 0) > 0 then
    print(string.format("  gradient preparation before its reduction (%s%s): %d bytes per element streamed, +%.3f s a step",
      o.reduce_dtype == "fp32" and "cast to fp32" or "", o.grad_predivide and ", divided in place (grad_predivide)" or "",
      time.grad_prep_bytes(o), r.t_grad_prep))
  end
  if o.precision == "fp8" then
    print(string.format("  fp8: %d bytes per GEMM input element cast (Transformer Engine's cast + amax)", terms.fp8_cast_bytes))
  end
  print(string.format("  slowest pipeline rank: %.3f s per micro-batch x (m %d + (p-1)/v %.2f) = %.3f s; bubble (p-1)/(v m) = %.3f",
    r.stage_s, r.microbatches, r.pp > 1 and (r.pp - 1) / (r.v or 1) or 0, r.stage_s * (r.microbatches + (r.pp > 1 and (r.pp - 1) / (r.v or 1) or 0)), r.bubble))
  print(string.format("  traffic per GPU: tp %.2f GB, dp %.2f GB, pp %.2f GB, ep %.2f GB, cp %.2f GB", gb(r.bytes_tp), gb(r.bytes_dp),
    gb(r.bytes_pp), gb(r.bytes_ep), gb(r.bytes_cp)))
  print(string.format("  exposed communication %.3f s: in the layers (tp/cp/ep) %.3f, pipeline %.3f, data parallel %.3f of %.3f over %d ranks",
    r.comm_exposed, r.t_layer_comm, r.t_pp, r.t_dp_exposed, r.t_dp, dz))
  if m.experts then
    print(string.format("  experts: %d, top-%d, ep %d; load on the busiest expert rank %.2fx the mean (expert_load=; capacity_factor= caps it)",
      m.experts, m.top_k or 1, r.ep or 1, o.expert_load or 1))
  end
  print(string.format("  step %.3f s (+ optimizer %.3f s); MFU %.1f%%, HFU %.1f%%, %.0f tokens/s", r.step_s, r.t_optimizer, 100 * r.mfu,
    100 * r.hfu, r.tokens_per_s))
  print(string.format("  model error +-%.1f%% on the step: %.3f to %.3f s (LOSO 95th percentile: 95%% of the %d published runs were"
    .. " predicted that close by a fit that had not seen their stack, plan_presets.model_error)", 100 * presets.model_error,
    r.step_s * (1 - presets.model_error), r.step_s * (1 + presets.model_error), #require("lab.plan_published").all))
end

