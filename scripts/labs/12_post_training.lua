-- Lab 12: post-training (SFT, LoRA, DPO, GRPO): what each keeps in memory, what a step costs,
-- and the formulas that scale it to 7B and 70B.
--
-- What it shows: (1) the four methods run here on one small GPT, data parallel over the
-- ranks: a base model trained briefly on 1-digit addition, then fine-tuned from it in full
-- (SFT), with LoRA adapters, with DPO (right vs near-miss answers, a frozen reference) and
-- with GRPO (8 sampled answers per prompt, reward 1 for the exact sum); per rank, lab.mem
-- measures the bytes of the weights, the reference model, the gradients, the optimizer
-- state and the activations' peak, and each step is timed; each method's
-- metric is shown before and after. (2) lab.posttrain.cost{method=, params=, ...}: the rules
-- behind the 7B/70B table, checked here first against the measured bytes of the small model
-- (equal to the byte, or the check fails). (3) FLOPs per prompt from the same function.
--   scripts/llmlab -n 4 scripts/labs/12_post_training.lua
local dist = lab.dist
local P = lab.posttrain
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(70)
-- a model of 100k parameters: one thread per rank runs its small products faster than two
-- (and OpenMP's spinning waits make two threads far slower on a loaded machine)
lab.set_threads(1)
lab.print0(string.format("== Lab 12: post-training memory and cost, %d ranks ==", world))

-- 1. The small model and its base: next-token training on "a+b=" followed by the sum until
-- the greedy answers are right on 40% of a probe set (same seed on every rank: one base
-- everywhere), which leaves every method room to improve.
local task = lab.data.add_task(1)
local cfg = { vocab = task.vocab, d_model = 32, n_layer = 2, n_head = 4, seq_len = task.seq_len }
local function sft_steps(model, opt, k)
  local last
  for _ = 1, k do
    local x, y = task.batch(32)
    opt:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    opt:step()
    last = loss:item()
  end
  return last
end
lab.manual_seed(999)
local probe = task.prompts(64)
lab.manual_seed(1)
local base = lab.nn.GPT(cfg)
local base_opt = lab.optim.AdamW(base:parameters(), { lr = 1e-2 })
local base_steps = 0
repeat
  sft_steps(base, base_opt, 25)
  base_steps = base_steps + 25
  local state = lab.get_rng_state()
  local right = P.mean_reward(base, probe, task.reward, { max_new_tokens = task.answer_len })
  lab.set_rng_state(state)
until right >= 0.4 or base_steps >= 600
base:eval()
local N = base:num_parameters()
local function copy_of_base()
  local state = lab.get_rng_state()
  local m = lab.nn.GPT(cfg)
  lab.set_rng_state(state)
  m:load_state_dict(base:state_dict())
  return m:eval() -- no dropout in cfg; eval so that generation and training see one model
end

-- evaluation data, drawn apart from the training batches and the same on every rank (1-digit
-- addition has 100 problems: these are problems the methods also train on, not unseen ones)
lab.manual_seed(1000)
local eval_prompts = task.prompts(128)
local eval_pairs = task.preference_pairs(128)
local function eval_reward(m, sampled)
  lab.manual_seed(555)
  return P.mean_reward(m, eval_prompts, task.reward,
    { max_new_tokens = task.answer_len, temperature = sampled and 1 or nil })
end

local function bytes()
  collectgarbage()
  collectgarbage()
  local t = lab.mem.stats().tags
  return { param = t.param.current, grad = t.grad.current, optimizer = t.optimizer.current,
    activation = t.activation.current }
end

-- Runs `steps` steps of one method from the base; returns the measured row.
local STEPS = 30
local GP = 8
local function run(method)
  local b0 = bytes()
  local policy = copy_of_base()
  local trainable = policy:parameters()
  if method == "lora" then trainable = lab.lora.apply(policy, { r = 2, alpha = 4 }) end
  local b1 = bytes()
  local ref = (method == "dpo" or method == "grpo") and P.reference(policy) or nil
  local b2 = bytes()
  local model = lab.ddp.wrap(policy)
  local opt = lab.optim.AdamW(trainable, { lr = ({ sft = 3e-3, lora = 1e-2, dpo = 1e-3, grpo = 2e-3 })[method] })
  local trainer, metric
  if method == "dpo" then
    trainer = P.DPO { policy = model, reference = ref, optimizer = opt, beta = 0.1 }
    metric = function() return trainer:evaluate(eval_pairs).margin end
  elseif method == "grpo" then
    trainer = P.GRPO { policy = model, reference = ref, optimizer = opt, reward = task.reward, group_size = 8,
      max_new_tokens = task.answer_len }
    metric = function() return eval_reward(policy, true) end
  else
    metric = function() return eval_reward(policy, false) end
  end
  local before = metric()
  lab.seed_per_rank(77) -- each rank its own data
  local times, act_peak = {}, 0
  for k = 1, STEPS do
    -- activations: the peak of one step above what it starts from, after a full collection
    -- (tensors Lua has not collected yet would count otherwise)
    local a0 = bytes().activation
    lab.mem.reset_peak()
    local t0 = lab.clock()
    if method == "dpo" then trainer:step(task.preference_pairs(16))
    elseif method == "grpo" then trainer:step(task.prompts(GP)) -- GP prompts x 8 samples
    else sft_steps(model, opt, 1) end
    times[k] = lab.clock() - t0
    act_peak = math.max(act_peak, lab.mem.stats().tags.activation.peak - a0)
  end
  local b3 = bytes() -- after the last step: its gradients are still held
  local after = metric()
  table.sort(times)
  local n_trainable = 0
  for _, p in ipairs(trainable) do n_trainable = n_trainable + p:numel() end
  return { method = method, weights = b1.param - b0.param, reference = b2.param - b1.param, grads = b3.grad - b0.grad,
    optimizer = b3.optimizer - b0.optimizer, activations = act_peak,
    step_s = times[(#times + 1) // 2], before = before, after = after, trainable = n_trainable, model = policy }
end

lab.print0(string.format("\n1. One small GPT (%d parameters, 1-digit addition), %d steps of each method from the same base", N, STEPS))
lab.print0(string.format("   (%d steps of next-token training),", base_steps))
lab.print0("   measured per rank by lab.mem (current bytes; activations: peak during the steps) and timed:")
lab.print0(string.format("   %-5s %10s %10s %10s %10s %10s %9s   %s", "", "weights", "reference", "grads", "optimizer",
  "activ.", "ms/step", "metric (eval set): before -> after"))
local rows = {}
local metric_name = { sft = "greedy reward", lora = "greedy reward", dpo = "DPO margin", grpo = "sampled reward" }
for _, method in ipairs({ "sft", "lora", "dpo", "grpo" }) do
  local r = run(method)
  rows[method] = r
  local fb = lab.format_bytes
  lab.print0(string.format("   %-5s %10s %10s %10s %10s %10s %9.1f   %s %.3f -> %.3f", method, fb(r.weights), fb(r.reference),
    fb(r.grads), fb(r.optimizer), fb(r.activations), 1000 * r.step_s, metric_name[method], r.before, r.after))
end
if dist.oversubscribed() then
  lab.print0(string.format("   (%d ranks share fewer cores: step times include the waits for a core)", world))
end
lab.print0("   (grads are DDP's buckets, which the .grad of each parameter views, as in PyTorch; SFT, LoRA and")
lab.print0("   DPO steps take 32 sequences, GRPO's 8 prompts x 8 samples = 64, sampled with model:generate,")
lab.print0("   which has no KV cache; DPO and GRPO add the reference's forward, without a graph)")
check("SFT and LoRA learn: greedy reward on the eval set rises",
  rows.sft.after > rows.sft.before and rows.lora.after > rows.lora.before)
check(string.format("DPO: the margin on the eval pairs rises from 0 (%.3f)", rows.dpo.after),
  rows.dpo.before == 0 and rows.dpo.after > 0.05)
check("GRPO: sampled reward on the eval set rises", rows.grpo.after > rows.grpo.before)
check(string.format("LoRA trains %.1f%% of the parameters; its grads and Adam state are that share",
  100 * rows.lora.trainable / N), rows.lora.trainable < 0.15 * N and rows.lora.grads < 0.15 * rows.sft.grads
  and rows.lora.optimizer < 0.15 * rows.sft.optimizer)
local lo = rows.lora.model
local ids = task.batch(8)
local before = lab.no_grad(function() return lo(ids) end)
lab.lora.merge(lo)
local merged = lab.no_grad(function() return lo(ids) end)
local scale = before:abs():max():item()
local diff = lab.max_abs_diff(before, merged)
-- f32 rounding (W + s B A summed once instead of two products, then through LayerNorms);
-- a merge without the scaling s = alpha / r would move the logits by ~0.1 or more
check(string.format("merging LoRA's adapters keeps the outputs (|diff| %.1e <= 1e-5 x max |logit| %.1f)", diff, scale),
  diff <= 1e-5 * scale)

-- 2. The rules, as a function: checked on the small model (f32: weights 4, grads 4, Adam 8
-- bytes per trained parameter; a frozen reference 4), then applied to 7B and 70B in mixed
-- precision (bf16 weights and grads, fp32 master and moments: 16 bytes per trained
-- parameter; frozen models 2).
lab.print0("\n2. lab.posttrain.cost against the measured bytes of the small model (f32):")
lab.print0(string.format("   %-5s %-28s %-28s %-28s %-28s", "", "weights", "reference", "grads", "optimizer"))
for _, method in ipairs({ "sft", "lora", "dpo", "grpo" }) do
  local r = rows[method]
  local c = P.cost { method = method, params = N, dtype = "f32", trainable = method == "lora" and r.trainable or nil }
  local cells, same = {}, true
  for _, k in ipairs({ "weights", "reference", "grads", "optimizer" }) do
    cells[#cells + 1] = string.format("%-28s", string.format("%d / %d", r[k], math.floor(c[k])))
    same = same and r[k] == c[k]
  end
  lab.print0(string.format("   %-5s %s", method, table.concat(cells)))
  check(string.format("%s: measured bytes = the formula's, all four (measured / formula)", method), same)
end

lab.print0("\n   The same function for 7B and 70B, GB, and 80 GB GPUs to hold it with ZeRO-3:")
lab.print0(string.format("   %-6s %9s %6s %9s %6s   %s", "method", "7B", "GPUs", "70B", "GPUs", "what is kept"))
for _, method in ipairs({ "sft", "lora", "qlora", "dpo", "ppo", "grpo" }) do
  local c7 = P.cost { method = method, params = 7e9, mixed_precision = true }
  local c70 = P.cost { method = method, params = 70e9, mixed_precision = true }
  lab.print0(string.format("   %-6s %9.1f %6d %9.1f %6d   %s", method, c7.total / 1e9, math.ceil(c7.total / 80e9),
    c70.total / 1e9, math.ceil(c70.total / 80e9), c7.models))
end
lab.print0("   (P.cost{method=, params=, mixed_precision=, trainable= or lora_fraction=, zero=, dp=, ...}: any size)")

-- 3. FLOPs per prompt (2N per token forward, 6N forward and backward; generation with a KV
-- cache, 2N per new token; on GPUs it is bound by memory bandwidth and takes longer than its
-- FLOPs suggest).
local PL, RL, G = 512, 512, 8
lab.print0(string.format("\n3. FLOPs per prompt in units of N (P = %d, R = %d, G = %d), and relative to SFT:", PL, RL, G))
local sft_f = P.cost { method = "sft", params = 1, prompt = PL, response = RL }.flops_in_N
local what = { sft = "train the policy on prompt + response", lora = "forward 2N, backward to activations only 2N",
  dpo = "2 sequences: policy trained, reference forward", ppo = "generate; reference, reward, value forward; train policy, value",
  grpo = "generate G; reference forward; train policy on G" }
for _, method in ipairs({ "sft", "lora", "dpo", "ppo", "grpo" }) do
  local f = P.cost { method = method, params = 1, prompt = PL, response = RL, group = G }.flops_in_N
  lab.print0(string.format("   %-5s %9d N  %5.2fx   %s", method, f, f / sft_f, what[method]))
end
lab.print0("   (GRPO spends its FLOPs on samples instead of a value model; PPO's value model costs memory)")
finish("lab 12")
