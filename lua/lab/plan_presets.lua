-- Presets for lab.plan: models and GPUs. Every field can be overridden in the plan call.
-- Models: layers, hidden, heads, kv_heads, ffn (intermediate size), vocab, gated (SwiGLU:
-- three FFN matrices instead of two), tied (output head shares the embedding), bias,
-- dropout (GPT-2/3 style training keeps dropout masks), experts and top_k for
-- mixture-of-experts. Sources: the models' papers and released configs.
-- GPUs: dense bf16 and fp8 FLOP/s, HBM capacity (bytes) and bandwidth, streaming
-- multiprocessors, NVLink bandwidth per GPU per direction, scale-out network bandwidth per
-- GPU, GPUs per node (vendor datasheets), and the generation whose achievable fractions it
-- takes: gemm (of dense peak, a large well-shaped GEMM; gemm_fp8 for FP8), attention (of
-- dense peak, FlashAttention-2 forward and backward at head dimension 128 and long
-- sequences), memory (of HBM bandwidth, streaming element-wise kernels). Those fractions
-- are assumptions of this planner, not datasheet figures: free parameters (P.free below)
-- set by a fit on the published runs and validated leave-one-source-out (plan_fit.lua).
-- P.terms holds the time the roofline does not see, each with its source.
local errors = require("lab.errors")
local P = {}

local function gpt(l, h, heads, vocab) -- GPT-2/3 style: 4h non-gated FFN, biases, dropout, tied embeddings
  return { layers = l, hidden = h, heads = heads, kv_heads = heads, ffn = 4 * h, vocab = vocab, gated = false,
    tied = true, bias = true, dropout = true }
end

P.models = {
  ["gpt3-175b"] = gpt(96, 12288, 96, 50257),
  ["llama2-7b"] = { layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000, gated = true },
  ["llama2-13b"] = { layers = 40, hidden = 5120, heads = 40, kv_heads = 40, ffn = 13824, vocab = 32000, gated = true },
  ["llama2-70b"] = { layers = 80, hidden = 8192, heads = 64, kv_heads = 8, ffn = 28672, vocab = 32000, gated = true },
  ["llama3-8b"] = { layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336, vocab = 128256, gated = true },
  ["llama3-70b"] = { layers = 80, hidden = 8192, heads = 64, kv_heads = 8, ffn = 28672, vocab = 128256, gated = true },
  ["llama3-405b"] = { layers = 126, hidden = 16384, heads = 128, kv_heads = 8, ffn = 53248, vocab = 128256, gated = true },
  ["mixtral-8x7b"] = { layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336, vocab = 32000, gated = true,
    experts = 8, top_k = 2 },
  -- Nemotron-4 15B (arXiv:2402.16819, Table 1): squared-ReLU 4h FFN, GQA, untied, no bias
  ["nemotron4-15b"] = { layers = 32, hidden = 6144, heads = 48, kv_heads = 8, ffn = 24576, vocab = 256000, gated = false },
  -- MegaScale's 175B GPT (Jiang et al., NSDI'24, Table 1 and section 6.1: vocabulary 64000)
  ["megascale-175b"] = gpt(96, 12288, 128, 64000),
}
-- MosaicML's MPT models as benchmarked in llm-foundry (scripts/train/benchmarking): 4h GELU
-- FFN, no biases, no dropout, tied embeddings, vocabulary 50368
local function mpt(l, h, heads)
  return { layers = l, hidden = h, heads = heads, kv_heads = heads, ffn = 4 * h, vocab = 50368, gated = false, tied = true }
end
-- name, layers, hidden, heads
for name, l, h, heads in ([[
  mpt-125m 12 768 12   mpt-350m 24 1024 16   mpt-760m 24 1536 12   mpt-1b 24 2048 16   mpt-3b 32 2560 32
  mpt-7b 32 4096 32    mpt-13b 40 5120 40    mpt-30b 48 7168 64    mpt-70b 80 8192 64
]]):gmatch("(%S+) (%d+) (%d+) (%d+)") do
  P.models[name] = mpt(tonumber(l), tonumber(h), tonumber(heads))
end
-- Megatron-LM's GPT models, vocabulary 51200: the 2021 scaling study (Narayanan et al.,
-- Table 1), its GPT-3 (Table 2; Korthikanti et al. Table 3) and Korthikanti et al.'s 22B
-- (Table 3). Name, layers, hidden, heads.
for name, l, h, heads in ([[
  megatron-1.7b 24 2304 24     megatron-3.6b 30 3072 32      megatron-7.5b 36 4096 32     megatron-18.4b 40 6144 48
  megatron-39.1b 48 8192 64    megatron-76.1b 60 10240 80    megatron-145.6b 80 12288 96  megatron-310.1b 96 16384 128
  megatron-529.6b 105 20480 128  megatron-1t 128 25600 160   megatron-175b 96 12288 96    megatron-22b 48 6144 64
]]):gmatch("(%S+) (%d+) (%d+) (%d+)") do
  P.models[name] = gpt(tonumber(l), tonumber(h), tonumber(heads), 51200)
end

-- Models of the runs added for issue 32 (lua/lab/plan_published.lua says where each row is from)
-- Megatron-Turing NLG 530B (Smith et al. 2022, arXiv:2201.11990, section 2.4): GPT-2's 50257
-- tokens, padded as Megatron pads them (a multiple of 128 x TP: 51200 at TP 8), as megatron-529.6b
P.models["mtnlg-530b"] = gpt(105, 20480, 128, 51200)
-- BLOOM 176B (BigScience 2022, arXiv:2211.05100, Table 3): ALiBi, vocabulary 250880 padded, no dropout
P.models["bloom-176b"] = gpt(70, 14336, 112, 250880)
P.models["bloom-176b"].dropout = false
-- NeMo's GPT-3 configurations (NeMo-Framework-Launcher conf/training/gpt3): 4h GELU FFN, biases
P.models["nemo-gpt3-5b"] = gpt(24, 4096, 32, 50304)
P.models["nemo-gpt3-20b"] = gpt(44, 6144, 48, 50304)
P.models["nemo-gpt3-175b"] = gpt(96, 12288, 96, 50304)
for _, k in ipairs({ "nemo-gpt3-5b", "nemo-gpt3-20b", "nemo-gpt3-175b" }) do
  P.models[k].dropout, P.models[k].tied = false, false
end
-- Qwen3 mixture-of-experts models (their released config.json): head_dim 128, 128 experts, top 8
P.models["qwen3-30b-a3b"] = { layers = 48, hidden = 2048, heads = 32, kv_heads = 4, head_dim = 128, ffn = 768, vocab = 151936,
  gated = true, experts = 128, top_k = 8 }
P.models["qwen3-235b-a22b"] = { layers = 94, hidden = 4096, heads = 64, kv_heads = 4, head_dim = 128, ffn = 1536, vocab = 151936,
  gated = true, experts = 128, top_k = 8 }

local GB, TB = 1e9, 1e12
P.gpus = {
  ["a100-40"] = { bf16 = 312e12, fp8 = nil, hbm = 40 * GB, hbm_bw = 1.555 * TB, sms = 108, nvlink = 300 * GB, network = 25 * GB,
    per_node = 8 },
  ["a100-80"] = { bf16 = 312e12, fp8 = nil, hbm = 80 * GB, hbm_bw = 2.039 * TB, sms = 108, nvlink = 300 * GB, network = 25 * GB,
    per_node = 8 },
  ["h100-80"] = { bf16 = 989e12, fp8 = 1979e12, hbm = 80 * GB, hbm_bw = 3.35 * TB, sms = 132, nvlink = 450 * GB, network = 50 * GB,
    per_node = 8 },
  ["h200-141"] = { bf16 = 989e12, fp8 = 1979e12, hbm = 141 * GB, hbm_bw = 4.8 * TB, sms = 132, nvlink = 450 * GB, network = 50 * GB,
    per_node = 8 },
  ["b200"] = { bf16 = 2250e12, fp8 = 4500e12, hbm = 192 * GB, hbm_bw = 8 * TB, sms = 148, nvlink = 900 * GB, network = 100 * GB,
    per_node = 8 },
}
P.gpus.a100 = P.gpus["a100-80"]
P.gpus.h100 = P.gpus["h100-80"]
P.gpus.h200 = P.gpus["h200-141"]
-- the generation whose fractions a GPU shares (the leave-one-source-out fit sets one set per
-- generation: plan_fit.lua)
for k, g in pairs(P.gpus) do g.generation = k:match("^a100") and "a100" or "h100" end
P.gpus["b200"].generation = "h100" -- reuses H100's fractions, untested

-- The time the roofline does not see, each a physical term (plan_time.lua applies them;
-- explain prints them). Values a source gives are cited; the few no source gives are free
-- constants, set with the fractions of peak by the leave-one-source-out fit (P.free below).
P.terms = {
  -- CUDA kernel launch, seconds per kernel the roofline would otherwise price at zero: 2.5-5
  -- us per launch on A100/H100 (NVIDIA CUDA C++ Best Practices Guide, "kernel launch
  -- overhead ... a few microseconds"; PyTorch's profiler shows 4-6 us gaps between eager
  -- kernels)
  launch = 4e-6,
  -- Latency of one step of a ring collective (the alpha of alpha-beta), per step: NVLink 2 us,
  -- across nodes 5 us (nccl-tests small-message latencies, as lab.netsim's dgx_h100 preset
  -- cites them). A ring all-gather or reduce-scatter over n ranks is n - 1 steps, an
  -- all-reduce 2(n - 1) (a tree's 2 log2 n across nodes), plus one kernel launch per call.
  alpha_nvlink = 2e-6,
  alpha_net = 5e-6,
  -- Data-parallel gradients are reduced in buckets, one collective call each: PyTorch DDP's
  -- bucket_cap_mb defaults to 25 MB (torch.nn.parallel.DistributedDataParallel docs);
  -- Megatron-LM's distributed optimizer buckets are of the same order (40M parameters).
  dp_bucket_bytes = 25e6,
  -- Attention kernels: speed relative to FlashAttention-2 on the same GPU at head dimension
  -- 128 and long sequences (the generation's `attention` fraction), fwd + bwd, causal.
  --   fa1: FlashAttention-2 (Dao 2023, arXiv:2307.08691, section 4.1, Fig. 4-5) is "2x
  --        faster than FlashAttention" forward and backward on A100: 0.5.
  --   triton: the Triton FlashAttention the same figures compare (OpenAI's tutorial kernel,
  --        which llm-foundry's attn_impl=triton derives from): FlashAttention-2 is 1.3-2.5x
  --        faster (slowest in the backward): 0.6 on A100. On Hopper it is a free parameter
  --        (P.free: triton_hopper) bounded by the two papers' figures, see below.
  --   fa3 / cudnn on Hopper: FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608, Fig. 5-7):
  --        1.5-2.0x FlashAttention-2 forward, 1.5-1.75x backward at head dim 128: 1.6; cuDNN
  --        9's fused attention (Transformer Engine's, in NeMo/Megatron-Core) is plotted beside
  --        it within 10%: 1.45. On Ampere both fall back to FlashAttention-2's speed.
  attention_kernels = {
    fa2 = { a100 = 1.0, h100 = 1.0 }, fa1 = { a100 = 0.5, h100 = 0.5 }, triton = { a100 = 0.6 },
    fa3 = { a100 = 1.0, h100 = 1.6 }, cudnn = { a100 = 1.0, h100 = 1.45 },
  },
  -- Sequence length: FlashAttention-2's fwd + bwd causal throughput at head dim 128 on A100
  -- (Fig. 4d: about 63%, 76%, 87%, 93% and 98% of its 16K figure at 512, 1K, 2K, 4K, 16K
  -- tokens, read approximately off the plot) follows s / (s + 300): short sequences leave
  -- tiles and the diagonal idle. The same shape on H100: FlashAttention-3's forward at head
  -- dim 128 runs at 69%, 83%, 91%, 95% and 99% of its 16K figure at 512 to 8K tokens
  -- (pytorch/benchmark commit ff65cb6, 430 to 621 TFLOP/s; the formula gives 63% to 96%).
  attention_seq_knee = 300,
  -- Head dimension: at 64 the same figures run at about 85% of head dim 128 (half the FLOPs
  -- per byte of K and V loaded); 256 about as 128.
  attention_head_dim = { [64] = 0.85, [128] = 1.0, [256] = 1.0 },
  -- FP8 GEMMs need their inputs cast (and the amax taken): one read of bf16 and one write of
  -- fp8 per GEMM input, Transformer Engine's cast_transpose (NVIDIA TE docs, "FP8 primer").
  fp8_cast_bytes = 3,
  -- Dropless MoE token dispatch (Megatron-Core's token dispatcher, megatron/core/transformer/
  -- moe/token_dispatcher.py and moe_utils.py): permute the routed copies into expert order
  -- (read and write), sort them by local expert after the all-to-all (read and write), undo
  -- both (read and write), and the weighted unpermute (read): 7 passes over the top_k x
  -- hidden copies of each token, each way.
  moe_dispatch_passes = 7,
  -- A blocking pipeline engine holds each transfer on the timelines of both stages it joins.
  -- The count is DeepSpeed's, not a fit: deepspeed/runtime/pipe/schedule.py,
  -- TrainSchedule.steps() emits, for each micro-batch, RecvActivation and SendGrad on its
  -- forward step when the stage has a previous stage, and SendActivation and RecvGrad on its
  -- backward step when it has a next one: four on a middle stage, two on the first and the
  -- last; the docstrings of those four instructions say "The communication is blocking"
  -- (PipelineEngine runs them through p2p.send/recv, deepspeed/runtime/pipe/p2p.py).
  -- Megatron-LM's schedules post their sends and receives asynchronously
  -- (batch_isend_irecv) beside the compute.
  pp_blocking_transfers = 4,
  -- The gradient preparation (no constant: the dtypes' bytes), on the compute stream before
  -- the gradient's reduction. PyTorch 1.13's FSDP (FullyShardedDataParallel._post_backward_hook:
  -- "Average grad by world_size for consistency with PyTorch DDP", param.grad.div_(
  -- gradient_predivide_factor)) first divides the whole unsharded gradient in place, a read
  -- and a write in its dtype (grad_predivide=true; llm-foundry's benchmark tables predate
  -- torch 2.0, their README says); then gradients reduced in fp32 while the backward
  -- computes them in bf16 are cast, a read of 2 and a write of 4 bytes per element
  -- (MixedPrecision.reduce_dtype; Composer's DEFAULT mode sets it to fp32). FSDP does both per
  -- layer per micro-batch, DDP and ZeRO-1/2 once a step. FSDP2 and Megatron-Core reduce with
  -- NCCL's average or scale the sharded result instead (no predivide).
}

-- The free parameters the leave-one-source-out fit sets (plan_fit.lua): the fractions of
-- peak per GPU generation and the constants of terms no source gives. default: the value a
-- plan uses (the fit on every source); start: where every fit starts, the planner's values
-- before any fit saw the sources (so no fold starts from a point its left-out source chose);
-- lo, hi: the fit's bounds.
--   layer_overhead: seconds per layer per pass (forward, backward, recompute) per
--     micro-batch of framework work between kernels (Python, hooks, allocator, stream syncs)
--     that no paper measures for these runs; the order is tens of microseconds (the launch
--     gaps of a profiler trace of one eager layer).
--   contention: the share by which compute slows while an overlapped NCCL collective runs:
--     NCCL's kernels take SMs (one block per channel, up to 32 channels) and HBM bandwidth;
--     the reported slowdown of overlapped GEMMs is 10-30% (Jangda et al., "Breaking the
--     computation and communication abstraction barrier", ASPLOS'22, section 2; Wang et al.
--     "Overlap communication with dependent computation", ASPLOS'23): those are its bounds.
--   triton_hopper: Triton's FlashAttention on H100 relative to FlashAttention-2 (the
--     attention_kernels factor on Hopper). Its bounds are the two papers' figures: 0.6, the
--     FlashAttention-2 paper's A100 figure (a kernel tuned for Ampere), to 1.13, the top of
--     the FlashAttention-3 paper's 1.05-1.13x for the Triton tutorial kernel on H100
--     (arXiv:2407.08608, Fig. 5, head dim 128). Which code path llm-foundry's 2023 kernel took
--     on H100 is not stated; it starts midway.
P.free = {
  { name = "gemm", generation = "a100", default = 0.70625, start = 0.72, lo = 0.5, hi = 0.9 },
  { name = "gemm", generation = "h100", default = 0.589375, start = 0.55, lo = 0.35, hi = 0.8 },
  { name = "gemm_fp8", generation = "h100", default = 0.580078125, start = 0.55, lo = 0.25, hi = 0.8 },
  { name = "attention", generation = "a100", default = 0.58984375, start = 0.55, lo = 0.3, hi = 0.8 },
  { name = "attention", generation = "h100", default = 0.24, start = 0.33, lo = 0.2, hi = 0.6 },
  { name = "memory", default = 0.6, start = 0.85, lo = 0.6, hi = 0.95 },
  { name = "bus_efficiency", default = 0.9415625, start = 0.8, lo = 0.5, hi = 0.95 },
  { name = "layer_overhead", default = 6.140625e-05, start = 30e-6, lo = 0, hi = 300e-6 },
  { name = "contention", default = 0.1428125, start = 0.1, lo = 0.1, hi = 0.3 },
  { name = "triton_hopper", generation = "h100", default = 0.81034375, start = 0.865, lo = 0.6, hi = 1.13 },
}
local GPU_FIELDS = { gemm = true, gemm_fp8 = true, attention = true, memory = true }

-- The planner's own error out of sample: the 95th percentile of the absolute leave-one-out
-- errors of every published row (plan_fit.lua; tests/lua/single/test_plan.lua checks it is
-- that figure). plan.range widens every answer by it beside the open assumptions: a step
-- time within +-model_error of the answer, which 95% of the published rows met.
P.model_error = 0.1664


-- values: nil (the defaults) or one number per free parameter, in P.free's order
local function check_values(fname, n, values)
  if values == nil then return end
  errors.arg(type(values) == "table" and #values == #P.free, fname, n,
    string.format("nil or a list of %d numbers (one per entry of lab.plan_presets.free)", #P.free), values)
  for i, f in ipairs(P.free) do
    errors.arg(type(values[i]) == "number" and values[i] == values[i], fname, n, string.format("values[%d] (%s): a number", i, f.name), values[i])
  end
end

-- the GPU presets take the free fractions of their generation (memory: every generation)
function P.apply_free(gpus, values)
  errors.type("lab.plan_presets.apply_free", 1, gpus, "table", "a table of GPU presets (as lab.plan_presets.gpus)")
  for k, g in pairs(gpus) do
    errors.arg(type(g) == "table", "lab.plan_presets.apply_free", 1, "gpus[" .. tostring(k) .. "]: a GPU preset table", g)
  end
  check_values("lab.plan_presets.apply_free", 2, values)
  for _, g in pairs(gpus) do
    for i, f in ipairs(P.free) do
      local v = values and values[i] or f.default
      if f.name == "gemm" or f.name == "gemm_fp8" or f.name == "attention" then
        if f.generation == g.generation then g[f.name] = v end
      elseif f.name == "memory" then g.memory = v end
    end
  end
end
P.apply_free(P.gpus)

-- the option values of the free terms that are not GPU fields
function P.free_options(values)
  check_values("lab.plan_presets.free_options", 1, values)
  local o = {}
  for i, f in ipairs(P.free) do
    if not GPU_FIELDS[f.name] then
      o[f.name] = values and values[i] or f.default
    end
  end
  return o
end

return P
