-- Published large training runs that lab.plan is checked against (README.md, "The planner
-- against published runs"; tests/lua/single/test_plan.lua): each run's model, GPUs, batch,
-- the layout it used, the implementation facts its paper states (recomputation, sequence
-- parallelism, attention kernel, overlap of data-parallel reductions) and its published
-- figure (MFU, HFU, tokens/s or model FLOP/s per GPU), and what it does not state (weak: the
-- alternatives that make its range). plan.published() re-plans each with its layout fixed
-- and the rest (ZeRO stage, micro-batch, pipeline chunks, recomputation where the paper
-- leaves it open) chosen by the enumeration, leave-one-source-out (plan_fit.lua).
local P = {}

-- Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
-- Megatron-LM", SC'21, arXiv:2104.04473. Table 1: A100-80GB (Selene), seq 2048, vocab
-- 51200, interleaved schedule; "percentage of theoretical peak" from their equation (3),
-- which counts the recomputed forward: a hardware-FLOPs utilisation. Table 2: the same for
-- GPT-3 175B and the 530B model at three scales (PTD parallelism, micro-batch 1).
local megatron21 = { recompute = "full", sequence_parallel = false, attention = "materialized", dp_overlap = false, zero = 0 }
-- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
-- MLSys 2023, arXiv:2205.05198. Tables 3 and 5: A100-80GB, seq 2048, TP 8, no data
-- parallelism, sequence parallelism + selective recomputation, interleaving with 3
-- chunks for 175B and 530B; MFU and HFU both given. Section 6.3: the 530B model at 8-way
-- data parallelism (2240 GPUs, batch 2240) reaches 54.2% MFU without overlapping the
-- gradient all-reduce.
local megascale_baseline = { attention = "materialized", dp_overlap = false }
local korthikanti = { recompute = "selective", sequence_parallel = true, attention = "materialized", dp_overlap = false, zero = 0 }

-- Weak assumptions: what a source does not state. Each row is planned with its best guess
-- (opts) and again with every alternative here; the spread is its range (plan_fit.lua),
-- named after the assumption that drives it.
local kernel_weak = { attention_kernel = { "fa2", "fa3" }, why = "attention kernel not stated (FlashAttention-2 or -3)" }
local te_weak = { attention_kernel = { "fa2", "cudnn" }, why = "attention kernel not stated (FlashAttention-2 or cuDNN's)" }
local mosaic_weak = { attention_kernel = { "triton", "fa2" },
  why = "attention kernel: llm-foundry's benchmark configs say triton; later ones flash (FlashAttention-2)" }
local batch_weak = { global_batch = { 8, 64 }, why = "global batch not stated (1 to 8 sequences per data-parallel rank)" }
local llama3 = { zero = 2, param_gather_overlap = true, attention_kernel = "fa2" }

P.runs = {
  { source = "Megatron-LM 2021, Table 1", model = "megatron-1.7b", gpu = "a100-80", gpus = 32, global_batch = 512, seq = 2048, tp = 1, pp = 1, metric = "hfu", published = 0.44, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-3.6b", gpu = "a100-80", gpus = 64, global_batch = 512, seq = 2048, tp = 2, pp = 1, metric = "hfu", published = 0.44, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-7.5b", gpu = "a100-80", gpus = 128, global_batch = 512, seq = 2048, tp = 4, pp = 1, metric = "hfu", published = 0.46, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-18.4b", gpu = "a100-80", gpus = 256, global_batch = 1024, seq = 2048, tp = 8, pp = 1, metric = "hfu", published = 0.43, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-39.1b", gpu = "a100-80", gpus = 512, global_batch = 1536, seq = 2048, tp = 8, pp = 2, metric = "hfu", published = 0.44, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-76.1b", gpu = "a100-80", gpus = 1024, global_batch = 1792, seq = 2048, tp = 8, pp = 4, metric = "hfu", published = 0.45, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-145.6b", gpu = "a100-80", gpus = 1536, global_batch = 2304, seq = 2048, tp = 8, pp = 8, metric = "hfu", published = 0.47, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-310.1b", gpu = "a100-80", gpus = 1920, global_batch = 2160, seq = 2048, tp = 8, pp = 16, metric = "hfu", published = 0.50, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-529.6b", gpu = "a100-80", gpus = 2520, global_batch = 2520, seq = 2048, tp = 8, pp = 35, metric = "hfu", published = 0.52, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 1", model = "megatron-1t", gpu = "a100-80", gpus = 3072, global_batch = 3072, seq = 2048, tp = 8, pp = 64, metric = "hfu", published = 0.52, opts = megatron21 },
  -- Table 2: 153, 141, 171 and 159 teraFLOP/s of 312
  { source = "Megatron-LM 2021, Table 2", model = "megatron-175b", gpu = "a100-80", gpus = 384, global_batch = 1536, seq = 2048, tp = 8, pp = 12, micro_batch = 1, metric = "hfu", published = 153 / 312, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 2", model = "megatron-175b", gpu = "a100-80", gpus = 1536, global_batch = 1536, seq = 2048, tp = 8, pp = 12, micro_batch = 1, metric = "hfu", published = 141 / 312, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 2", model = "megatron-529.6b", gpu = "a100-80", gpus = 560, global_batch = 2240, seq = 2048, tp = 8, pp = 35, micro_batch = 1, metric = "hfu", published = 171 / 312, opts = megatron21 },
  { source = "Megatron-LM 2021, Table 2", model = "megatron-529.6b", gpu = "a100-80", gpus = 2240, global_batch = 2240, seq = 2048, tp = 8, pp = 35, micro_batch = 1, metric = "hfu", published = 159 / 312, opts = megatron21 },
  { source = "Korthikanti 2022, Table 5", model = "megatron-22b", gpu = "a100-80", gpus = 8, global_batch = 4, seq = 2048, tp = 8, pp = 1, micro_batch = 4, metric = "mfu", published = 0.415, opts = korthikanti },
  { source = "Korthikanti 2022, Table 5", model = "megatron-175b", gpu = "a100-80", gpus = 64, global_batch = 64, seq = 2048, tp = 8, pp = 8, vpp = 3, micro_batch = 1, metric = "mfu", published = 0.514, opts = korthikanti },
  { source = "Korthikanti 2022, Table 5", model = "megatron-529.6b", gpu = "a100-80", gpus = 280, global_batch = 280, seq = 2048, tp = 8, pp = 35, vpp = 3, micro_batch = 1, metric = "mfu", published = 0.560, opts = korthikanti },
  { source = "Korthikanti 2022, Table 5", model = "megatron-1t", gpu = "a100-80", gpus = 512, global_batch = 512, seq = 2048, tp = 8, pp = 64, micro_batch = 1, metric = "mfu", published = 0.563, opts = korthikanti },
  { source = "Korthikanti 2022, section 6.3", model = "megatron-529.6b", gpu = "a100-80", gpus = 2240, global_batch = 2240, seq = 2048, tp = 8, pp = 35, vpp = 3, micro_batch = 1, metric = "mfu", published = 0.542, opts = korthikanti },
  -- Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783, section 3.3.2 and Table 4:
  -- H100-80GB, TP 8, PP 16, 16M tokens per batch, BF16 MFU; interleaved with one layer
  -- fewer on the first and last stage; FSDP sharding gradients and optimizer states (not
  -- the parameters); all-gather context parallelism; "without activation checkpointing"
  -- at 8K tokens.
  { source = "Llama 3 405B, Table 4", model = "llama3-405b", gpu = "h100", gpus = 8192, global_batch = 2048, seq = 8192, tp = 8, pp = 16, cp = 1, metric = "mfu", published = 0.43, opts = llama3, weak = kernel_weak },
  { source = "Llama 3 405B, Table 4", model = "llama3-405b", gpu = "h100", gpus = 16384, global_batch = 2048, seq = 8192, tp = 8, pp = 16, cp = 1, metric = "mfu", published = 0.41, opts = llama3, weak = kernel_weak },
  { source = "Llama 3 405B, Table 4", model = "llama3-405b", gpu = "h100", gpus = 16384, global_batch = 128, seq = 131072, tp = 8, pp = 16, cp = 16, metric = "mfu", published = 0.38, opts = llama3, weak = kernel_weak },
  -- NVIDIA, "Nemotron-4 15B Technical Report", arXiv:2402.16819, Table 2: H100-80GB, TP 8,
  -- data parallel 96 / 192 / 288 with a distributed optimizer, seq 4096
  { source = "Nemotron-4 15B, Table 2", model = "nemotron4-15b", gpu = "h100", gpus = 768, global_batch = 384, seq = 4096, tp = 8, pp = 1, metric = "mfu", published = 0.343, opts = { zero = 1, attention_kernel = "cudnn" }, weak = te_weak },
  { source = "Nemotron-4 15B, Table 2", model = "nemotron4-15b", gpu = "h100", gpus = 1536, global_batch = 768, seq = 4096, tp = 8, pp = 1, metric = "mfu", published = 0.333, opts = { zero = 1, attention_kernel = "cudnn" }, weak = te_weak },
  { source = "Nemotron-4 15B, Table 2", model = "nemotron4-15b", gpu = "h100", gpus = 2304, global_batch = 1152, seq = 4096, tp = 8, pp = 1, metric = "mfu", published = 0.305, opts = { zero = 1, attention_kernel = "cudnn" }, weak = te_weak },
  -- Jiang et al., "MegaScale: Scaling Large Language Model Training to More Than 10,000
  -- GPUs", NSDI'24, arXiv:2402.15627, Table 2: the Megatron-LM baseline (not MegaScale's
  -- own rows, whose parallel blocks and sliding-window attention the planner does not
  -- model) on Ampere GPUs with eight 200G NICs per node, 175B, TP 8, PP 8, 6 interleaved
  -- chunks, seq 2048. Data-parallel overlap and FlashAttention-2 are MegaScale's additions
  -- (sections 3.2, 3.3, Table 3), so the baseline runs without either.
  { source = "MegaScale 2024, Table 2", model = "megascale-175b", gpu = "a100-80", gpus = 256, global_batch = 768, seq = 2048, tp = 8, pp = 8, vpp = 6, metric = "mfu", published = 0.530, opts = megascale_baseline },
  { source = "MegaScale 2024, Table 2", model = "megascale-175b", gpu = "a100-80", gpus = 512, global_batch = 768, seq = 2048, tp = 8, pp = 8, vpp = 6, metric = "mfu", published = 0.499, opts = megascale_baseline },
  { source = "MegaScale 2024, Table 2", model = "megascale-175b", gpu = "a100-80", gpus = 768, global_batch = 768, seq = 2048, tp = 8, pp = 8, vpp = 6, metric = "mfu", published = 0.467, opts = megascale_baseline },
  { source = "MegaScale 2024, Table 2", model = "megascale-175b", gpu = "a100-80", gpus = 1024, global_batch = 768, seq = 2048, tp = 8, pp = 8, vpp = 6, metric = "mfu", published = 0.447, opts = megascale_baseline },
  { source = "MegaScale 2024, Table 2", model = "megascale-175b", gpu = "a100-80", gpus = 3072, global_batch = 6144, seq = 2048, tp = 8, pp = 8, vpp = 6, metric = "mfu", published = 0.487, opts = megascale_baseline },
  { source = "MegaScale 2024, Table 2", model = "megascale-175b", gpu = "a100-80", gpus = 6144, global_batch = 6144, seq = 2048, tp = 8, pp = 8, vpp = 6, metric = "mfu", published = 0.478, opts = megascale_baseline },
  { source = "MegaScale 2024, Table 2", model = "megascale-175b", gpu = "a100-80", gpus = 8192, global_batch = 6144, seq = 2048, tp = 8, pp = 8, vpp = 6, metric = "mfu", published = 0.433, opts = megascale_baseline },
  { source = "MegaScale 2024, Table 2", model = "megascale-175b", gpu = "a100-80", gpus = 12288, global_batch = 6144, seq = 2048, tp = 8, pp = 8, vpp = 6, metric = "mfu", published = 0.412, opts = megascale_baseline },
  -- MosaicML, llm-foundry scripts/train/benchmarking/README.md ("MPT Training Benchmarks"):
  -- FSDP FULL_SHARD (ZeRO-3) in Composer's "DEFAULT" mixed precision (the tables' MP Mode
  -- column: bf16 parameters, gradients reduced in fp32) without model parallelism, the tables' micro-
  -- batch and activation checkpointing (True: full recomputation); PyTorch 1.13's FSDP, which
  -- divides each gradient before its reduction (the tables predate torch 2.0, the README's
  -- note says: grad_predivide); MFU by the same 6N +
  -- 12 L d s FLOPs per token. A100-80GB nodes with 1600 Gbps RoCE; H100-80GB. Every row
  -- tried is here or in P.misses below (outside 15%: README.md lists them with the reasons).
  { source = "MosaicML llm-foundry, A100", model = "mpt-1b", gpu = "a100-80", gpus = 8, global_batch = 448, seq = 2048, tp = 1, pp = 1, micro_batch = 14, metric = "mfu", published = 0.5986, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, A100", model = "mpt-3b", gpu = "a100-80", gpus = 8, global_batch = 160, seq = 2048, tp = 1, pp = 1, micro_batch = 10, metric = "mfu", published = 0.6211, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, A100", model = "mpt-7b", gpu = "a100-80", gpus = 8, global_batch = 96, seq = 2048, tp = 1, pp = 1, micro_batch = 6, metric = "mfu", published = 0.6423, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, A100", model = "mpt-7b", gpu = "a100-80", gpus = 8, global_batch = 128, seq = 8192, tp = 1, pp = 1, micro_batch = 8, metric = "mfu", published = 0.5447, opts = { zero = 3, recompute = "full", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, A100", model = "mpt-30b", gpu = "a100-80", gpus = 8, global_batch = 504, seq = 2048, tp = 1, pp = 1, micro_batch = 3, metric = "hfu", published = 0.7374, opts = { zero = 3, recompute = "full", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  -- (the A100 table's 70B rows say MP Mode PURE, precision bf16: gradients reduced in bf16)
  { source = "MosaicML llm-foundry, A100", model = "mpt-70b", gpu = "a100-80", gpus = 64, global_batch = 2048, seq = 2048, tp = 1, pp = 1, micro_batch = 8, metric = "mfu", published = 0.5333, opts = { zero = 3, recompute = "full", attention_kernel = "triton", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, H100", model = "mpt-3b", gpu = "h100", gpus = 16, global_batch = 480, seq = 2048, tp = 1, pp = 1, micro_batch = 10, metric = "mfu", published = 0.4373, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, H100", model = "mpt-7b", gpu = "h100", gpus = 8, global_batch = 48, seq = 2048, tp = 1, pp = 1, micro_batch = 6, metric = "mfu", published = 0.4644, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, H100", model = "mpt-30b", gpu = "h100", gpus = 32, global_batch = 1344, seq = 2048, tp = 1, pp = 1, micro_batch = 14, metric = "mfu", published = 0.4392, opts = { zero = 3, recompute = "full", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, H100", model = "mpt-70b", gpu = "h100", gpus = 64, global_batch = 2048, seq = 2048, tp = 1, pp = 1, micro_batch = 8, metric = "mfu", published = 0.4257, opts = { zero = 3, recompute = "full", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
}

-- Published runs the planner missed by more than 15% before issue 32's terms (kept apart so
-- the history reads; P.all joins every list).
P.misses = {
  { source = "MosaicML llm-foundry, A100", model = "mpt-125m", gpu = "a100-80", gpus = 8, global_batch = 640, seq = 2048, tp = 1, pp = 1, micro_batch = 40, metric = "mfu", published = 0.4479, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, A100", model = "mpt-350m", gpu = "a100-80", gpus = 8, global_batch = 512, seq = 2048, tp = 1, pp = 1, micro_batch = 32, metric = "mfu", published = 0.5162, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, H100", model = "mpt-760m", gpu = "h100", gpus = 16, global_batch = 384, seq = 2048, tp = 1, pp = 1, micro_batch = 24, metric = "mfu", published = 0.3789, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, A100", model = "mpt-13b", gpu = "a100-80", gpus = 8, global_batch = 48, seq = 2048, tp = 1, pp = 1, micro_batch = 2, metric = "mfu", published = 0.5957, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, A100", model = "mpt-13b", gpu = "a100-80", gpus = 8, global_batch = 24, seq = 32768, tp = 1, pp = 1, cp = 1, micro_batch = 1, metric = "mfu", published = 0.5169, opts = { zero = 3, recompute = "full", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, A100", model = "mpt-7b", gpu = "a100-80", gpus = 8, global_batch = 16, seq = 65536, tp = 1, pp = 1, cp = 1, micro_batch = 1, metric = "mfu", published = 0.4697, opts = { zero = 3, recompute = "full", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, H100", model = "mpt-13b", gpu = "h100", gpus = 64, global_batch = 128, seq = 2048, tp = 1, pp = 1, micro_batch = 2, metric = "mfu", published = 0.3986, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, H100", model = "mpt-1b", gpu = "h100", gpus = 64, global_batch = 1280, seq = 2048, tp = 1, pp = 1, micro_batch = 20, metric = "mfu", published = 0.4085, opts = { zero = 3, recompute = "none", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
  { source = "MosaicML llm-foundry, H100", model = "mpt-7b", gpu = "h100", gpus = 8, global_batch = 16, seq = 65536, tp = 1, pp = 1, cp = 1, micro_batch = 1, metric = "mfu", published = 0.2859, opts = { zero = 3, recompute = "full", attention_kernel = "triton", reduce_dtype = "fp32", grad_predivide = true }, weak = mosaic_weak },
}

-- Runs added for issue 32, committed with the planner's answers on them before any change to
-- its model (the commit that adds them says what it answered). metric "tokens": tokens per
-- second per GPU, which needs no FLOP-counting convention.
local mtnlg = { recompute = "full", sequence_parallel = false, attention = "materialized", dp_overlap = false, zero = 1, vpp = 1,
  pp_blocking = true }
local nemo = { zero = 1, param_gather_overlap = true, precision = "fp8", attention_kernel = "cudnn" }
P.added = {
  -- Smith et al., "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B",
  -- arXiv:2201.11990, section 2.4: DGX A100-80GB (Selene), TP 8, PP 35 (DeepSpeed's 1F1B, not
  -- interleaved), data parallel 8/10/12 with ZeRO-1, global batch 1920, seq 2048, activation
  -- checkpointing; 60.1, 50.2 and 44.4 s per iteration = 126, 121 and 113 teraFLOP/s per GPU
  -- counted with the recomputed forward (Megatron-LM's equation 3: an HFU).
  { source = "MT-NLG 530B 2022, section 2.4", model = "mtnlg-530b", gpu = "a100-80", gpus = 2240, global_batch = 1920, seq = 2048, tp = 8, pp = 35, micro_batch = 1, metric = "hfu", published = 126 / 312, opts = mtnlg },
  { source = "MT-NLG 530B 2022, section 2.4", model = "mtnlg-530b", gpu = "a100-80", gpus = 2800, global_batch = 1920, seq = 2048, tp = 8, pp = 35, micro_batch = 1, metric = "hfu", published = 121 / 312, opts = mtnlg },
  { source = "MT-NLG 530B 2022, section 2.4", model = "mtnlg-530b", gpu = "a100-80", gpus = 3360, global_batch = 1920, seq = 2048, tp = 8, pp = 35, micro_batch = 1, metric = "hfu", published = 113 / 312, opts = mtnlg },
  -- BigScience, "BLOOM: A 176B-Parameter Open-Access Multilingual Language Model",
  -- arXiv:2211.05100, section 3.4-3.5 and the model card: 48 nodes of 8 A100-80GB, four
  -- 100 Gb/s Omni-Path links per node (6.25 GB/s per GPU), Megatron-DeepSpeed with TP 4, PP 12,
  -- DP 8, ZeRO-1, micro-batch 2, global batch 2048, seq 2048; "about 150 TFLOPs" per GPU in
  -- the run (156 in their fastest configuration), counted with the recomputed forward.
  { source = "BLOOM 176B 2022, section 3.5", model = "bloom-176b", gpu = "a100-80", gpus = 384, global_batch = 2048, seq = 2048, tp = 4, pp = 12, micro_batch = 2, metric = "hfu", published = 150 / 312,
    opts = { recompute = "full", sequence_parallel = false, attention = "materialized", dp_overlap = false, zero = 1, vpp = 1, gpu_network = 6.25e9,
      pp_blocking = true } },
  -- torchtitan (Liang et al., arXiv:2410.06511; docs/performance.md): Llama 3 70B with FSDP2 on
  -- 64 A100-80GB, local batch 1, seq 8192, full activation checkpointing, 51.7% MFU (their
  -- 6N + 12 l h q t per token, the planner's count)
  { source = "torchtitan 2024, A100", model = "llama3-70b", gpu = "a100-80", gpus = 64, global_batch = 64, seq = 8192, tp = 1, pp = 1, micro_batch = 1, metric = "mfu", published = 0.517, opts = { zero = 3, recompute = "full", attention_kernel = "fa2" } },
  -- NVIDIA NeMo performance summary, NeMo 24.07 container, DGX-H100, FP8 (GEMMs in FP8 with
  -- Transformer Engine), tokens per second per GPU as published
  { source = "NeMo 24.07, DGX-H100 FP8", model = "nemo-gpt3-5b", gpu = "h100", gpus = 64, global_batch = 2048, seq = 2048, tp = 1, pp = 1, micro_batch = 4, metric = "tokens", published = 22521, opts = nemo },
  { source = "NeMo 24.07, DGX-H100 FP8", model = "nemo-gpt3-20b", gpu = "h100", gpus = 64, global_batch = 256, seq = 2048, tp = 2, pp = 1, micro_batch = 2, metric = "tokens", published = 5851, opts = nemo },
  { source = "NeMo 24.07, DGX-H100 FP8", model = "nemo-gpt3-175b", gpu = "h100", gpus = 128, global_batch = 256, seq = 2048, tp = 4, pp = 8, vpp = 6, micro_batch = 1, metric = "tokens", published = 726, opts = nemo },
  { source = "NeMo 24.07, DGX-H100 FP8", model = "nemo-gpt3-175b", gpu = "h100", gpus = 512, global_batch = 2048, seq = 2048, tp = 4, pp = 8, vpp = 6, micro_batch = 2, metric = "tokens", published = 782, opts = nemo },
  { source = "NeMo 24.07, DGX-H100 FP8", model = "llama2-7b", gpu = "h100", gpus = 8, global_batch = 128, seq = 4096, tp = 1, pp = 1, micro_batch = 1, metric = "tokens", published = 16847, opts = nemo },
  { source = "NeMo 24.07, DGX-H100 FP8", model = "llama2-13b", gpu = "h100", gpus = 16, global_batch = 128, seq = 4096, tp = 1, pp = 4, vpp = 10, micro_batch = 1, metric = "tokens", published = 8646, opts = nemo },
  { source = "NeMo 24.07, DGX-H100 FP8", model = "llama2-70b", gpu = "h100", gpus = 64, global_batch = 128, seq = 4096, tp = 4, pp = 4, vpp = 20, micro_batch = 1, metric = "tokens", published = 1707, opts = nemo },
  { source = "NeMo 24.07, DGX-H100 FP8", model = "llama3-8b", gpu = "h100", gpus = 8, global_batch = 128, seq = 8192, tp = 1, pp = 1, cp = 2, micro_batch = 1, metric = "tokens", published = 12036, opts = nemo },
  { source = "NeMo 24.07, DGX-H100 FP8", model = "llama3-70b", gpu = "h100", gpus = 64, global_batch = 128, seq = 8192, tp = 4, pp = 4, cp = 2, vpp = 5, micro_batch = 1, metric = "tokens", published = 1533, opts = nemo },
  -- NeMo long-sequence performance (NeMo 24.03.01, DGX-H100, FP8): Llama 2 7B with context
  -- parallelism, model TFLOP/s per GPU (Megatron's count: 6N + 12 l h s per token, as the
  -- planner's). The global batch is not given: one sequence per data-parallel rank is assumed.
  { source = "NeMo long sequence, DGX-H100 FP8", model = "llama2-7b", gpu = "h100", gpus = 16, global_batch = 8, seq = 16384, tp = 2, pp = 1, cp = 1, micro_batch = 1, metric = "tflops", weak = batch_weak, published = 660e12, opts = nemo },
  { source = "NeMo long sequence, DGX-H100 FP8", model = "llama2-7b", gpu = "h100", gpus = 32, global_batch = 8, seq = 32768, tp = 2, pp = 1, cp = 2, micro_batch = 1, metric = "tflops", weak = batch_weak, published = 610e12, opts = nemo },
  { source = "NeMo long sequence, DGX-H100 FP8", model = "llama2-7b", gpu = "h100", gpus = 64, global_batch = 8, seq = 65536, tp = 4, pp = 1, cp = 2, micro_batch = 1, metric = "tflops", weak = batch_weak, published = 574e12, opts = nemo },
  { source = "NeMo long sequence, DGX-H100 FP8", model = "llama2-7b", gpu = "h100", gpus = 128, global_batch = 8, seq = 131072, tp = 4, pp = 1, cp = 4, micro_batch = 1, metric = "tflops", weak = batch_weak, published = 555e12, opts = nemo },
  { source = "NeMo long sequence, DGX-H100 FP8", model = "llama2-7b", gpu = "h100", gpus = 256, global_batch = 8, seq = 262144, tp = 4, pp = 1, cp = 8, micro_batch = 1, metric = "tflops", weak = batch_weak, published = 549e12, opts = nemo },
  -- Megatron-Bridge performance summary, NeMo 25.11 container, DGX-H100, FP8 with current
  -- scaling; MoE runs dropless with the tokens force-balanced among experts
  { source = "Megatron-Bridge 25.11, DGX-H100", model = "llama3-8b", gpu = "h100", gpus = 8, global_batch = 128, seq = 8192, tp = 1, pp = 1, micro_batch = 1, metric = "tokens", published = 14451, opts = { zero = 3, precision = "fp8", attention_kernel = "cudnn" } },
  { source = "Megatron-Bridge 25.11, DGX-H100", model = "llama3-70b", gpu = "h100", gpus = 64, global_batch = 128, seq = 8192, tp = 4, pp = 8, vpp = 5, micro_batch = 1, metric = "tokens", published = 1602, opts = nemo },
  { source = "Megatron-Bridge 25.11, DGX-H100", model = "llama3-405b", gpu = "h100", gpus = 1024, global_batch = 512, seq = 8192, tp = 8, pp = 8, cp = 2, vpp = 8, micro_batch = 1, metric = "tokens", published = 292, opts = nemo },
  { source = "Megatron-Bridge 25.11, DGX-H100", model = "qwen3-30b-a3b", gpu = "h100", gpus = 16, global_batch = 512, seq = 4096, tp = 1, pp = 2, vpp = 24, ep = 8, micro_batch = 2, metric = "tokens", published = 5275, opts = nemo },
  { source = "Megatron-Bridge 25.11, DGX-H100", model = "qwen3-235b-a22b", gpu = "h100", gpus = 256, global_batch = 2048, seq = 4096, tp = 2, pp = 8, vpp = 4, ep = 32, micro_batch = 1, metric = "tokens", published = 1575, opts = nemo },
}

-- Sources that share a software stack (the same code and its authors, often the same
-- cluster) are one fold of the leave-one-out fit: a term tuned on one of them would otherwise
-- be validated on its twin. A source not listed is a stack by itself.
P.stacks = {
  -- Megatron-LM on Selene, by NVIDIA's applied deep learning research team, 2021 and 2022
  ["Megatron-LM 2021"] = "Megatron-LM (NVIDIA, Selene)",
  ["Korthikanti 2022"] = "Megatron-LM (NVIDIA, Selene)",
  -- Megatron-DeepSpeed: Megatron's layers under DeepSpeed's pipeline engine and ZeRO-1
  ["MT-NLG 530B 2022"] = "Megatron-DeepSpeed",
  ["BLOOM 176B 2022"] = "Megatron-DeepSpeed",
  -- NVIDIA's Megatron-Core and Transformer Engine on DGX H100, through NeMo and its
  -- successor Megatron-Bridge (Nemotron-4 was trained with the same stack)
  ["Nemotron-4 15B"] = "NeMo / Megatron-Core (NVIDIA, DGX H100)",
  ["NeMo 24.07"] = "NeMo / Megatron-Core (NVIDIA, DGX H100)",
  ["NeMo long sequence"] = "NeMo / Megatron-Core (NVIDIA, DGX H100)",
  ["Megatron-Bridge 25.11"] = "NeMo / Megatron-Core (NVIDIA, DGX H100)",
}

-- The network each source states (scale-out bandwidth per GPU: the GPU preset's network,
-- 25 GB/s on A100 nodes with eight 200 Gb/s NICs, 50 GB/s on H100 nodes with eight 400 Gb/s
-- ones; BLOOM's Omni-Path is in its opts). A run across nodes whose source is not listed here
-- leaves the network open: its range spans the preset's bandwidth and half of it (as
-- plan.range does for a question without gpu_network), a cluster with half the NICs or a
-- fabric that delivers half (RoCE without adaptive routing, a rail-less topology).
P.network = {
  ["Megatron-LM 2021, Table 1"] = "Selene: eight 200 Gb/s HDR InfiniBand HCAs per DGX A100 (section 5)",
  ["Megatron-LM 2021, Table 2"] = "Selene: eight 200 Gb/s HDR InfiniBand HCAs per DGX A100 (section 5)",
  ["Korthikanti 2022, Table 5"] = "Selene, the cluster of Megatron-LM 2021",
  ["Korthikanti 2022, section 6.3"] = "Selene, the cluster of Megatron-LM 2021",
  ["Llama 3 405B, Table 4"] = "RoCE at 400 Gb/s per GPU (section 3.3.1)",
  ["Nemotron-4 15B, Table 2"] = "DGX H100 nodes with eight 400 Gb/s InfiniBand HCAs (section 2)",
  ["MegaScale 2024, Table 2"] = "eight 200G NICs per node (section 6)",
  ["MosaicML llm-foundry, A100"] = "the A100 table's title: 1600 Gbps node-node interconnect (RoCE)",
  ["MT-NLG 530B 2022, section 2.4"] = "Selene: eight 200 Gb/s HDR InfiniBand HCAs per DGX A100",
  ["NeMo 24.07, DGX-H100 FP8"] = "DGX H100 (its datasheet: eight 400 Gb/s ConnectX-7 ports)",
  ["NeMo long sequence, DGX-H100 FP8"] = "DGX H100 (its datasheet: eight 400 Gb/s ConnectX-7 ports)",
  ["Megatron-Bridge 25.11, DGX-H100"] = "DGX H100 (its datasheet: eight 400 Gb/s ConnectX-7 ports)",
}

-- Every published run in one list, each with its group (the source name before its first
-- comma) and its stack: the fold the leave-one-out fit leaves out as a whole
P.all = {}
for _, list in ipairs({ P.runs, P.misses, P.added }) do
  for _, run in ipairs(list) do
    run.group = run.source:match("^(.-),") or run.source
    run.stack = P.stacks[run.group] or run.group
    P.all[#P.all + 1] = run
  end
end

-- The rows leave-one-out validation misses by more than 15%, each with the reason (key:
-- source, model, GPUs, seq). tests/lua/single/test_plan.lua fails when another row leaves
-- its band, and asks for a row here to be moved back when it comes within 15%.
local fp8_fold = "no stack but NVIDIA's publishes FP8 runs, so the fold that leaves that stack out has nothing to "
  .. "fit the FP8 GEMM fraction on and keeps its start value, 0.55 (the fit on every row: 0.58); the stack's dense "
  .. "FP8 rows run up to 15% pessimistic under it"
P.loso_misses = {
  ["MosaicML llm-foundry, A100|mpt-30b|8|2048"] = "published HFU 73.7% needs GEMMs faster than the 69-72% of peak the "
    .. "other stacks' A100 rows support (the planner's ceiling at full tiles): pessimistic by 17%",
  ["MT-NLG 530B 2022, section 2.4|mtnlg-530b|3360|2048"] = "the three MT-NLG rows are optimistic by 12-17%: the "
    .. "published steps (60.1, 50.2 and 44.4 s for 240, 192 and 160 micro-batches) lie within 0.3 s of (m + 34) x 0.197 s "
    .. "+ 6.0 s, the planner's at 0.195 s per micro-batch on its slowest stage + 0.56 s: about 5.4 s a step, the same at "
    .. "every data-parallel width, that no term the paper or DeepSpeed's code states or implies explains (README.md, "
    .. "\"Why MT-NLG stays listed\", says what was checked)",
  ["Megatron-Bridge 25.11, DGX-H100|qwen3-235b-a22b|256|4096"] = "pessimistic by 26%: its EP 32 spans four nodes, "
    .. "and the planner charges each all-to-all at the GPU's own NIC (24 of 32 peers are in other nodes: 100 MB of "
    .. "each rank's 134 MB dispatch, 2.1 ms, four times per layer per micro-batch, exposed). The source does not "
    .. "state its dispatcher: DeepEP's, which crosses the network once per token and node rather than once per routed "
    .. "copy, or Megatron-Core's overlap of the all-to-all with another micro-batch's compute would shrink or hide "
    .. "it. Before the all-to-all was priced at the NIC (a ring's bandwidth, eight NICs per node) the row was 39% "
    .. "optimistic",
  ["Megatron-Bridge 25.11, DGX-H100|qwen3-30b-a3b|16|4096"] = "fine-grained dropless MoE (128 experts of 768, top "
    .. "8), 2.3x optimistic: the published 24.8 s step is 32 ms per layer per 8192-token micro-batch, the planner's "
    .. "14 ms. No physical term in the source's facts closes the 18 ms: the four all-to-alls move 235 MB each within "
    .. "a node (2.2 ms charged, 4.4 ms at half NVLink's bandwidth); the 16 local experts' grouped GEMMs (4096 rows "
    .. "each, 2048 x 1536 and 768 x 2048) are 1.9 TFLOP forward and backward, 1.6 ms at the fitted 58% of FP8 peak, "
    .. "and would need to run at 5% of it to take 18 ms more; the seven permute and unpermute passes stream 5.6 GB (2.8 ms "
    .. "charged); the dropless dispatcher's host sync of its split sizes exposes launch gaps of a few ms at most. "
    .. "The same table's 25.09 release published 10494 tokens/s for this layout (with token dropping), twice "
    .. "25.11's and within 17% of the planner's answer: the difference lies between two releases of the same "
    .. "software, not in the work the hardware does",
}
-- The rows within 15% whose published figure lies outside their range (plan_fit.lua: the
-- answers under the open assumptions widened by the 95th percentile of the planner's error
-- on the other stacks), each with the reason; the LOSO misses above lie outside theirs too
-- when README.md lists them so (llmlab --plan published prints every row outside its range).
P.range_misses = {
  ["Megatron-Bridge 25.11, DGX-H100|llama3-70b|64|8192"] = "pessimistic by 14.9%, beyond the other stacks' error band: "
    .. fp8_fold,
}
-- sources whose rows are all optimistic by more than 10% (the issue asks for none)
P.optimistic_sources = {
  ["MT-NLG 530B 2022"] = "+11.6%, +12.5%, +16.6%: a fixed 5.4 s a step that no stated or implied term explains (README.md, "
    .. "\"Why MT-NLG stays listed\"; plan_published.loso_misses)",
}

function P.key(run) return string.format("%s|%s|%d|%d", run.source, run.model, run.gpus, run.seq) end

-- the plan options of a run: its layout fixed, the paper's implementation facts
function P.options(run)
  local o = { model = run.model, gpu = run.gpu, gpus = run.gpus, global_batch = run.global_batch, seq = run.seq, tp = run.tp,
    pp = run.pp, cp = run.cp or 1, ep = run.ep, vpp = run.vpp, micro_batch = run.micro_batch }
  for k, v in pairs(run.opts or {}) do o[k] = v end
  return o
end

return P
