-- Presets for lab.plan: models and GPUs. Every field can be overridden in the plan call.
-- Models: layers, hidden, heads, kv_heads, ffn (intermediate size), vocab, gated (SwiGLU:
-- three FFN matrices instead of two), tied (output head shares the embedding), bias,
-- dropout (GPT-2/3 style training keeps dropout masks), experts and top_k for
-- mixture-of-experts. Sources: the models' papers and released configs.
-- GPUs: dense bf16 and fp8 FLOP/s, HBM capacity (bytes) and bandwidth, streaming
-- multiprocessors, NVLink bandwidth per GPU per direction, scale-out network bandwidth per
-- GPU, GPUs per node (vendor datasheets), and three achievable fractions that are
-- assumptions of this planner, not datasheet figures: gemm (of dense peak, a large
-- well-shaped GEMM), attention (of dense peak, the flash-attention kernels forward and
-- backward), memory (of HBM bandwidth, streaming element-wise kernels). The GEMM fractions
-- are the planner's calibration against the published runs of README.md's planner section;
-- attention: FlashAttention-2 reaches 50-73% of peak on A100 (its paper) and 300-335
-- TFLOP/s forward on H100 at head dimension 128 (FlashAttention-3's paper). H200 and B200
-- reuse H100's fractions, untested.
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
  -- the GPT models of Megatron-LM's 2021 scaling study (Narayanan et al., Table 1)
  ["megatron-1.7b"] = gpt(24, 2304, 24, 51200),
  ["megatron-3.6b"] = gpt(30, 3072, 32, 51200),
  ["megatron-7.5b"] = gpt(36, 4096, 32, 51200),
  ["megatron-18.4b"] = gpt(40, 6144, 48, 51200),
  ["megatron-39.1b"] = gpt(48, 8192, 64, 51200),
  ["megatron-76.1b"] = gpt(60, 10240, 80, 51200),
  ["megatron-145.6b"] = gpt(80, 12288, 96, 51200),
  ["megatron-310.1b"] = gpt(96, 16384, 128, 51200),
  ["megatron-529.6b"] = gpt(105, 20480, 128, 51200),
  ["megatron-1t"] = gpt(128, 25600, 160, 51200),
  -- Megatron-LM's GPT-3 (vocabulary 51200; Narayanan et al. Table 2, Korthikanti et al. Table 3)
  ["megatron-175b"] = gpt(96, 12288, 96, 51200),
  -- Korthikanti et al. 2022, Table 3
  ["megatron-22b"] = gpt(48, 6144, 64, 51200),
  -- MegaScale's 175B GPT (Jiang et al., NSDI'24, Table 1 and section 6.1: vocabulary 64000)
  ["megascale-175b"] = gpt(96, 12288, 128, 64000),
}
-- MosaicML's MPT models as benchmarked in llm-foundry (scripts/train/benchmarking): 4h GELU
-- FFN, no biases, no dropout, tied embeddings, vocabulary 50368
local function mpt(l, h, heads)
  return { layers = l, hidden = h, heads = heads, kv_heads = heads, ffn = 4 * h, vocab = 50368, gated = false, tied = true }
end
P.models["mpt-125m"] = mpt(12, 768, 12)
P.models["mpt-350m"] = mpt(24, 1024, 16)
P.models["mpt-760m"] = mpt(24, 1536, 12)
P.models["mpt-1b"] = mpt(24, 2048, 16)
P.models["mpt-3b"] = mpt(32, 2560, 32)
P.models["mpt-7b"] = mpt(32, 4096, 32)
P.models["mpt-13b"] = mpt(40, 5120, 40)
P.models["mpt-30b"] = mpt(48, 7168, 64)
P.models["mpt-70b"] = mpt(80, 8192, 64)

-- Models of the runs added for issue 32 (lua/lab/plan_published.lua says where each row is from)
-- Megatron-Turing NLG 530B (Smith et al. 2022, arXiv:2201.11990, section 2.4): GPT-2 vocabulary
P.models["mtnlg-530b"] = gpt(105, 20480, 128, 50272)
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
    per_node = 8, gemm = 0.72, attention = 0.55, memory = 0.85 },
  ["a100-80"] = { bf16 = 312e12, fp8 = nil, hbm = 80 * GB, hbm_bw = 2.039 * TB, sms = 108, nvlink = 300 * GB, network = 25 * GB,
    per_node = 8, gemm = 0.72, attention = 0.55, memory = 0.85 },
  ["h100-80"] = { bf16 = 989e12, fp8 = 1979e12, hbm = 80 * GB, hbm_bw = 3.35 * TB, sms = 132, nvlink = 450 * GB, network = 50 * GB,
    per_node = 8, gemm = 0.55, attention = 0.33, memory = 0.85 },
  ["h200-141"] = { bf16 = 989e12, fp8 = 1979e12, hbm = 141 * GB, hbm_bw = 4.8 * TB, sms = 132, nvlink = 450 * GB, network = 50 * GB,
    per_node = 8, gemm = 0.55, attention = 0.33, memory = 0.85 },
  ["b200"] = { bf16 = 2250e12, fp8 = 4500e12, hbm = 192 * GB, hbm_bw = 8 * TB, sms = 148, nvlink = 900 * GB, network = 100 * GB,
    per_node = 8, gemm = 0.55, attention = 0.33, memory = 0.85 },
}
P.gpus.a100 = P.gpus["a100-80"]
P.gpus.h100 = P.gpus["h100-80"]
P.gpus.h200 = P.gpus["h200-141"]

return P
