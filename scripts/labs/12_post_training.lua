-- Lab 12: post-training (SFT, LoRA, DPO, PPO, GRPO): memory and cost.
--
-- What it shows: (1) full fine-tuning against LoRA on a GPT here, measured: what each
-- trains, the bytes of gradients and optimizer state, and that LoRA's merged model gives
-- the adapter's outputs; (2) how many models each post-training method keeps in memory and
-- what that costs for 7B and 70B models; (3) the FLOPs per prompt of each method from the
-- 2N (forward) / 6N (forward + backward) rule, generation included.
--   scripts/llmlab -n 4 scripts/labs/12_post_training.lua
local dist = lab.dist
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(66)
lab.print0(string.format("== Lab 12: post-training memory and cost, %d ranks ==", world))

-- 1. A base model "pretrained" to copy even tokens, then fine-tuned to map t -> 30 - t,
-- once in full and once with LoRA adapters (r = 4) on every Linear. Data parallel: each
-- rank its own batches, gradients averaged.
local cfg = { vocab = 32, d_model = 64, n_layer = 2, n_head = 4, seq_len = 16 }
local function batch(k)
  lab.manual_seed(100 * k + rank)
  return lab.randint(0, cfg.vocab // 2, { 4, cfg.seq_len }) * 2
end
local function pretrained()
  lab.manual_seed(3)
  local m = lab.nn.GPT(cfg)
  local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
  for k = 1, 20 do
    local ids = batch(k)
    opt:zero_grad()
    local _, loss = m(ids, ids)
    loss:backward()
    opt:step()
  end
  opt:zero_grad() -- the pretraining's gradients are not the fine-tuning's
  return m
end
local function bytes(tag)
  collectgarbage()
  collectgarbage()
  return lab.mem.stats().tags[tag].current
end
local function finetune(mode)
  local base = pretrained()
  local total = base:num_parameters()
  local g0, o0 = bytes("grad"), bytes("optimizer")
  local trainable = mode == "lora" and lab.lora.apply(base, { r = 4, alpha = 8 }) or base:parameters()
  local model = lab.ddp.wrap(base)
  local opt = lab.optim.AdamW(trainable, { lr = mode == "lora" and 1e-2 or 3e-3 })
  local losses, grad_bytes = {}, 0
  for k = 1, 30 do
    local ids = batch(1000 + k)
    opt:zero_grad()
    local _, loss = model(ids, 30 - ids)
    loss:backward()
    grad_bytes = math.max(grad_bytes, bytes("grad") - g0)
    opt:step()
    local l = lab.tensor({ loss:item() }, { dtype = "f64" })
    dist.all_reduce(l)
    losses[k] = l[1] / world
  end
  local n_trainable = 0
  for _, p in ipairs(trainable) do n_trainable = n_trainable + p:numel() end
  return { model = base, losses = losses, total = total, trainable = n_trainable, grads = grad_bytes,
    optimizer = bytes("optimizer") - o0 }
end
lab.print0("\n1. Fine-tuning a small GPT in full and with LoRA (r = 4, every Linear), measured per rank:")
lab.print0(string.format("   %-6s %12s %12s %12s %14s %10s %10s", "", "parameters", "trainable", "grads", "optimizer",
  "loss 1", "loss 30"))
local runs = {}
for _, mode in ipairs({ "full", "lora" }) do
  local r = finetune(mode)
  runs[mode] = r
  lab.print0(string.format("   %-6s %12d %12d %12s %14s %10.3f %10.3f", mode, r.total, r.trainable,
    lab.format_bytes(r.grads), lab.format_bytes(r.optimizer), r.losses[1], r.losses[30]))
end
local full, lo = runs.full, runs.lora
check(string.format("LoRA trains %.1f%% of the parameters", 100 * lo.trainable / full.total),
  lo.trainable < 0.15 * full.total)
check("LoRA's gradients and Adam moments are that share of full's",
  lo.optimizer < 0.2 * full.optimizer and lo.grads < 0.2 * full.grads)
check("both fine-tunings learn the new map (loss halves)", full.losses[30] < 0.5 * full.losses[1]
  and lo.losses[30] < 0.5 * lo.losses[1])
local ids = batch(9999)
local before = lab.no_grad(function() return lo.model(ids) end)
lab.lora.merge(lo.model)
local after = lab.no_grad(function() return lo.model(ids) end)
check("merging the adapters into the weights keeps the outputs (|diff| < 1e-5)", lab.max_abs_diff(before, after) < 1e-5)

-- 2. Memory of the weight state, per method, before any sharding. Trained models hold
-- 16 bytes per parameter (bf16 weights and gradients, fp32 master and Adam moments);
-- frozen ones 2 (bf16 weights). LoRA trains ~0.5% of the parameters (r = 16 on the
-- attention and MLP matrices of a Llama-style model); QLoRA stores the frozen base in
-- 4 bits (0.5 bytes). DPO keeps a frozen reference policy; PPO a reference, a reward
-- model and a trained value model (often the policy's size); GRPO drops the value model
-- and uses the mean reward of a group of G samples as the baseline.
local TRAINED, FROZEN = lab.mem.estimate { params = 1, mixed_precision = true }.total, 2
local methods = {
  { "SFT (full)", function(n) return TRAINED * n end, "policy trained" },
  { "LoRA", function(n) return FROZEN * n + TRAINED * 0.005 * n end, "frozen bf16 base + adapters" },
  { "QLoRA", function(n) return 0.5 * n + TRAINED * 0.005 * n end, "4-bit frozen base + adapters" },
  { "DPO", function(n) return TRAINED * n + FROZEN * n end, "policy + frozen reference" },
  { "PPO", function(n) return 2 * TRAINED * n + 2 * FROZEN * n end, "policy, value trained; reference, reward frozen" },
  { "GRPO", function(n) return TRAINED * n + FROZEN * n end, "policy + frozen reference, no value model" },
}
lab.print0("\n2. Weight state (no activations, no KV cache), GB, and 80 GB GPUs to hold it with ZeRO-3:")
lab.print0(string.format("   %-11s %10s %6s %10s %6s   %s", "method", "7B", "GPUs", "70B", "GPUs", "what is kept"))
for _, m in ipairs(methods) do
  local b7, b70 = m[2](7e9), m[2](70e9)
  lab.print0(string.format("   %-11s %10.1f %6d %10.1f %6d   %s", m[1], b7 / 1e9, math.ceil(b7 / 80e9), b70 / 1e9,
    math.ceil(b70 / 80e9), m[3]))
end
-- (sections 2 and 3 are arithmetic on the stated rules, printed rather than checked: a
-- check of a formula against itself could not fail)

-- 3. FLOPs per prompt of P = 512 tokens with responses of R = 512 tokens (N parameters:
-- 2N per token forward, 6N forward and backward; generation is forward only, one token
-- at a time, so on GPUs it is bound by memory bandwidth and costs more time than its
-- FLOPs suggest). DPO trains on a chosen and a rejected response; PPO generates one
-- response, scores it with reference, reward and value models, then trains policy and
-- value; GRPO generates a group of G = 8 and trains the policy on all of them.
local P, R, G = 512, 512, 8
local L = P + R
local cost = {
  { "SFT", 6 * L, "train the policy on prompt + response" },
  { "LoRA", 4 * L, "forward 2N, backward to activations only 2N (frozen weights)" },
  { "DPO", 2 * (6 * L + 2 * L), "2 sequences: policy trained, reference forward" },
  { "PPO", 2 * R + 3 * 2 * L + 2 * 6 * L, "generate; reference, reward, value forward; train policy, value" },
  { "GRPO", G * (2 * R + 2 * L + 6 * L), "generate G; reference forward; train policy on G" },
}
lab.print0(string.format("\n3. FLOPs per prompt in units of N (P = %d, R = %d, G = %d), and relative to SFT:", P, R, G))
for _, c in ipairs(cost) do
  lab.print0(string.format("   %-5s %9d N  %5.2fx   %s", c[1], c[2], c[2] / cost[1][2], c[3]))
end
lab.print0("   (GRPO spends its FLOPs on samples instead of a value model; PPO's value model costs memory)")
finish("lab 12")
