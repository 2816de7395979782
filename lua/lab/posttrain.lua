-- lab.posttrain: fine-tuning a language model from preferences (DPO) and from a verifiable
-- reward (GRPO), each with a frozen reference model; both run under lab.ddp.
--
--   local ref = lab.posttrain.reference(model)            -- a frozen copy of the start
--   local dpo = lab.posttrain.DPO{policy = lab.ddp.wrap(model), reference = ref,
--                                 optimizer = opt, beta = 0.1}
--   local stats = dpo:step(task.preference_pairs(16))     -- {loss, margin, accuracy, ...}
--   local grpo = lab.posttrain.GRPO{policy = ..., reference = ref, optimizer = opt,
--                                   reward = task.reward, group_size = 8, max_new_tokens = 3}
--   local stats = grpo:step(task.prompts(8))              -- {reward, kl, clip_fraction, ...}
--
-- DPO (Rafailov et al. 2023) trains on pairs (prompt, chosen, rejected): with the summed
-- log-probabilities of each completion under the policy (pi) and the reference (ref),
--   loss = -log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))
-- whose minimiser is the policy that the RLHF objective with a KL penalty of strength beta
-- would reach under a Bradley-Terry reward; beta * (pi - ref) is the "implicit reward".
-- GRPO (Shao et al. 2024, DeepSeekMath) samples G completions per prompt from the policy,
-- scores them with the reward, and uses the group's mean and standard deviation as the
-- baseline: A_i = (r_i - mean) / (std + 1e-4) (no value model, unlike PPO). Each token of
-- completion i contributes PPO's clipped surrogate min(rho A_i, clip(rho, 1-eps, 1+eps) A_i),
-- rho = pi / pi_old, minus beta times the k3 estimate of KL(pi || ref):
--   pi_ref / pi - log(pi_ref / pi) - 1   (unbiased, always >= 0)
-- averaged over the tokens of a completion and over completions. Completions here have a
-- fixed length (max_new_tokens), as in the addition task.
local errors = require("lab.errors")
local sorted_keys = require("lab.sorted_keys")
local posttrain = {}
local nn = lab.nn

local function fail(op, fmt, ...)
  error(string.format("rank %d: %s: " .. fmt, lab.dist.rank(), op, ...), 0)
end

local function check_number(op, name, v, lo, hi)
  if type(v) ~= "number" or v ~= v or v <= lo or v >= hi then
    fail(op, "%s must be a number in (%g, %g), got %s", name, lo, hi, tostring(v))
  end
end

local function check_beta(op, beta)
  if type(beta) ~= "number" or beta ~= beta or beta < 0 or beta == math.huge then
    fail(op, "beta (the KL weight) must be a finite number >= 0, got %s", tostring(beta))
  end
end

local function check_seqs(op, name, t)
  if not lab.is_tensor(t) or t.ndim ~= 2 or (t.dtype ~= "i64" and t.dtype ~= "i32") then
    fail(op, "%s must be integer token ids [B, L], got %s", name,
      lab.is_tensor(t) and (t.dtype .. " [" .. table.concat(t.shape, ",") .. "]") or type(t))
  end
end

-- ---- log-probabilities of completions ----

-- logits [B, R, V] predicting targets [B, R] (0-based ids) -> the log-probability of each
-- target [B, R]: log_softmax picked at the target by a one-hot mask (differentiable)
function posttrain.token_logprobs(logits, targets)
  errors.tensor("lab.posttrain.token_logprobs", 1, logits)
  errors.tensor("lab.posttrain.token_logprobs", 2, targets)
  if #logits.shape ~= 3 then errors.raise("lab.posttrain.token_logprobs", "logits must be [B, R, V], got %d dimensions", #logits.shape) end
  if logits.dtype == "bf16" or logits.dtype == "f16" then logits = logits:float() end
  local V = logits.shape[3]
  local onehot = targets:unsqueeze(-1):eq(lab.arange(V, { device = targets.device })):to(logits.dtype)
  return (logits:log_softmax(-1) * onehot):sum(-1)
end

-- seqs [B, L] = prompt (prompt_len tokens) then completion (R = L - prompt_len tokens) ->
-- each completion token's log-probability under model [B, R]. Position t of the input
-- predicts token t + 1, so the completion is predicted from positions prompt_len .. L - 1.
function posttrain.completion_logprobs(model, seqs, prompt_len, op)
  op = op or "completion_logprobs"
  check_seqs(op, "seqs", seqs)
  local L = seqs.shape[2]
  if math.type(prompt_len) ~= "integer" or prompt_len < 1 or prompt_len >= L then
    fail(op, "prompt_len must be an integer in [1, %d] for sequences of %d tokens, got %s", L - 1, L,
      tostring(prompt_len))
  end
  local R = L - prompt_len
  local logits = model(seqs:narrow(2, 1, L - 1))
  return posttrain.token_logprobs(logits:narrow(2, prompt_len, R), seqs:narrow(2, prompt_len + 1, R))
end

-- t on the device of model's parameters: batches made on the cpu (lab.data's tasks) are
-- moved there, as TRL's trainers move each batch to the model's device, so a model moved
-- with model:to(device) trains on them unchanged
local function to_model(model, t)
  local ps = model:parameters()
  local dev = ps[1] and ps[1].device
  if dev and t.device ~= dev then return t:to(dev) end
  return t
end

-- -log sigmoid(x) as -log_softmax([0, x])[2]: stable for any x, with the exact gradient
-- sigmoid(x) - 1 everywhere (x = 0 included, where the DPO loss starts)
local function neg_log_sigmoid(x)
  local zero = lab.zeros(x.shape, { dtype = x.dtype, device = x.device })
  return -lab.stack({ zero, x }, -1):log_softmax(-1):select(-1, 2)
end

-- ---- DPO ----

-- pi_c, pi_r, ref_c, ref_r: [B] summed completion log-probabilities -> the mean loss and
-- the statistics TRL reports (as Lua numbers, this rank's batch): the implicit rewards of
-- chosen and rejected, their margin, the share of pairs whose chosen reward is higher
-- (accuracy), and the share where the policy itself prefers chosen (policy_accuracy)
function posttrain.dpo_loss(pi_c, pi_r, ref_c, ref_r, beta)
  check_number("dpo_loss", "beta", beta, 0, math.huge)
  local rc = (pi_c - ref_c) * beta
  local rr = (pi_r - ref_r) * beta
  local loss = neg_log_sigmoid(rc - rr):mean()
  local stats = lab.no_grad(function()
    local B = rc.shape[1]
    return {
      loss = loss:item(),
      reward_chosen = rc:mean():item(),
      reward_rejected = rr:mean():item(),
      margin = (rc - rr):mean():item(),
      accuracy = (rc - rr):gt(0):to("f64"):sum():item() / B,
      policy_accuracy = (pi_c - pi_r):gt(0):to("f64"):sum():item() / B,
    }
  end)
  return loss, stats
end

-- the statistics averaged over the ranks of group (each rank had its own batch)
local function average(stats, group)
  local keys = sorted_keys(stats)
  local t = lab.empty(#keys, { dtype = "f64" })
  for i, k in ipairs(keys) do t[i] = stats[k] end
  lab.dist.all_reduce(t, { op = "avg", group = group })
  local out = {}
  for i, k in ipairs(keys) do out[k] = t[i] end
  return out
end

-- A frozen copy of a lab.nn.GPT (or of the one inside a DDP wrapper): same weights, no
-- gradients, eval mode; the caller's random stream is left as it was.
function posttrain.reference(model)
  local inner = type(model) == "table" and nn.is_module(model.module) and model.module or model -- DDP: its module
  if not nn.is_module(inner) or getmetatable(inner) ~= nn.GPT then
    fail("reference", "copies a lab.nn.GPT (or a DDP-wrapped one); for another model pass a frozen "
      .. "copy as reference=, got %s", nn.is_module(inner) and "another module" or type(model))
  end
  local state = lab.get_rng_state()
  local ref = nn.GPT(inner.cfg)
  lab.set_rng_state(state)
  local dev = inner.wte.weight.device
  if ref.wte.weight.device ~= dev then ref:to(dev) end
  local src = inner:named_parameters()
  local dst = ref:named_parameters()
  lab.no_grad(function()
    for i, np in ipairs(dst) do
      np[2]:copy_(src[i][2])
      np[2]:requires_grad_(false)
    end
  end)
  return ref:eval()
end

local function check_trainer(op, opts)
  if type(opts) ~= "table" then fail(op, "takes a table of options, got %s", type(opts)) end
  if not opts.policy then fail(op, "policy= (the model to train) is missing") end
  if not nn.is_module(opts.reference) then
    fail(op, "reference= must be a frozen model (lab.posttrain.reference(policy)), got %s", type(opts.reference))
  end
  local o = opts.optimizer
  if type(o) ~= "table" or not o.step or not o.zero_grad then
    fail(op, "optimizer= must have step() and zero_grad() (lab.optim.AdamW, a ZeRO engine), got %s", type(o))
  end
end

local DPO = {}
DPO.__index = DPO
-- opts: policy (a model or lab.ddp wrapper), reference (frozen), optimizer, beta (0.1),
-- group (the DDP group whose ranks' statistics are averaged; the world by default)
function posttrain.DPO(opts)
  check_trainer("DPO", opts)
  local beta = opts.beta or 0.1
  check_number("DPO", "beta", beta, 0, math.huge)
  return setmetatable({ policy = opts.policy, reference = opts.reference, optimizer = opts.optimizer,
    beta = beta, group = opts.group or (opts.policy.group) }, DPO)
end

-- pairs = {chosen = [B, L], rejected = [B, L], prompt_len = P}: summed completion
-- log-probabilities under the policy (chosen and rejected in one batch of 2B, so one
-- forward and one backward: what DDP expects) and under the reference (no graph)
function DPO:loss(pairs)
  if type(pairs) ~= "table" then fail("DPO", "pairs must be {chosen=, rejected=, prompt_len=}, got %s", type(pairs)) end
  check_seqs("DPO", "pairs.chosen", pairs.chosen)
  check_seqs("DPO", "pairs.rejected", pairs.rejected)
  local c, r = pairs.chosen, pairs.rejected
  if c.shape[1] ~= r.shape[1] or c.shape[2] ~= r.shape[2] then
    fail("DPO", "chosen [%s] and rejected [%s] must have one shape", table.concat(c.shape, ","), table.concat(r.shape, ","))
  end
  local B = c.shape[1]
  local both = to_model(self.policy, lab.cat({ c, r }, 1))
  local pi = posttrain.completion_logprobs(self.policy, both, pairs.prompt_len, "DPO"):sum(2)
  local ref = lab.no_grad(function()
    return posttrain.completion_logprobs(self.reference, both, pairs.prompt_len, "DPO"):sum(2)
  end)
  return posttrain.dpo_loss(pi:narrow(1, 1, B), pi:narrow(1, B + 1, B), ref:narrow(1, 1, B), ref:narrow(1, B + 1, B),
    self.beta)
end

-- one optimizer step on this rank's pairs; the statistics averaged over the ranks
function DPO:step(pairs)
  self.optimizer:zero_grad()
  local loss, stats = self:loss(pairs)
  loss:backward()
  self.optimizer:step()
  return average(stats, self.group)
end

-- the statistics on pairs without training (averaged over the ranks)
function DPO:evaluate(pairs)
  local _, stats = lab.no_grad(function() return self:loss(pairs) end)
  return average(stats, self.group)
end

-- ---- GRPO ----

-- rewards: a Lua list of N = groups x G numbers, each group's G consecutive -> advantages
-- [N] (f32): (r - group mean) / (group std + 1e-4), the std unbiased (torch.std, as TRL)
function posttrain.group_advantages(rewards, G)
  errors.type("lab.posttrain.group_advantages", 1, rewards, "table", "a list of rewards")
  if math.type(G) ~= "integer" or G < 2 or #rewards % G ~= 0 then
    fail("group_advantages", "needs groups of G >= 2 rewards: got %d rewards and G = %s", #rewards, tostring(G))
  end
  for i = 1, #rewards do
    errors.arg(type(rewards[i]) == "number", "lab.posttrain.group_advantages", 1, string.format("rewards[%d]: a number", i), rewards[i])
  end
  local adv = {}
  for s = 1, #rewards, G do
    local mean, var = 0, 0
    for i = s, s + G - 1 do mean = mean + rewards[i] end
    mean = mean / G
    for i = s, s + G - 1 do var = var + (rewards[i] - mean) ^ 2 end
    local std = math.sqrt(var / (G - 1))
    for i = s, s + G - 1 do adv[i] = (rewards[i] - mean) / (std + 1e-4) end
  end
  return lab.tensor(adv, { dtype = "f32" })
end

-- logp, old, ref: [N, R] per-token log-probabilities under the policy (with graph), the
-- policy that sampled (no graph) and the reference; adv [N]. Returns the loss (minus the
-- objective) and statistics: the k3 KL per token, the share of tokens whose ratio was clipped.
function posttrain.grpo_loss(logp, old, ref, adv, clip, beta)
  check_number("grpo_loss", "clip", clip, 0, 1)
  check_beta("grpo_loss", beta)
  local ratio = (logp - old):exp()
  local A = adv:view(adv.shape[1], 1)
  local surrogate = (ratio * A):minimum(ratio:clamp(1 - clip, 1 + clip) * A)
  local d = ref - logp
  local kl = d:exp() - d - 1 -- k3: pi_ref / pi - log(pi_ref / pi) - 1
  local objective = (surrogate - kl * beta):mean(2):mean()
  local loss = -objective
  local stats = lab.no_grad(function()
    local clipped = ratio:lt(1 - clip):to("f64") + ratio:gt(1 + clip):to("f64")
    return { loss = loss:item(), kl = kl:mean():item(), clip_fraction = clipped:mean():item() }
  end)
  return loss, stats
end

local GRPO = {}
GRPO.__index = GRPO
-- opts: policy, reference, optimizer, reward (function(prompt, completion) -> number, both
-- Lua lists of 0-based tokens), group_size G (8), max_new_tokens, temperature (1), top_k,
-- clip eps (0.2), beta (0.04, the KL weight), inner_steps mu (1: optimizer steps per batch of
-- samples; the ratio moves from 1 only when mu > 1), group (as DPO's)
function posttrain.GRPO(opts)
  check_trainer("GRPO", opts)
  if type(opts.reward) ~= "function" then
    fail("GRPO", "reward= must be a function(prompt, completion) -> number, got %s", type(opts.reward))
  end
  local G, mu = opts.group_size or 8, opts.inner_steps or 1
  if math.type(G) ~= "integer" or G < 2 then fail("GRPO", "group_size must be an integer >= 2, got %s", tostring(G)) end
  if math.type(mu) ~= "integer" or mu < 1 then fail("GRPO", "inner_steps must be an integer >= 1, got %s", tostring(mu)) end
  local n = opts.max_new_tokens
  if math.type(n) ~= "integer" or n < 1 then fail("GRPO", "max_new_tokens must be an integer >= 1, got %s", tostring(n)) end
  local clip, beta = opts.clip or 0.2, opts.beta or 0.04
  check_number("GRPO", "clip", clip, 0, 1)
  check_beta("GRPO", beta)
  return setmetatable({ policy = opts.policy, reference = opts.reference, optimizer = opts.optimizer,
    reward = opts.reward, G = G, mu = mu, clip = clip, beta = beta, group = opts.group or opts.policy.group,
    sample = { max_new_tokens = n, temperature = opts.temperature, top_k = opts.top_k } }, GRPO)
end

-- prompts [B, P] -> completions sampled G per prompt: seqs [B G, P + R] (row (b-1) G + g)
-- and their rewards (a Lua list)
function GRPO:rollout(prompts)
  check_seqs("GRPO", "prompts", prompts)
  local B, P = prompts.shape[1], prompts.shape[2]
  prompts = to_model(self.policy, prompts)
  local rep = prompts:unsqueeze(2):expand(B, self.G, P):reshape(B * self.G, P)
  local seqs = lab.generate(self.policy, rep, self.sample)
  local rows = seqs:tolist()
  local rewards = {}
  for i, row in ipairs(rows) do
    local prompt, completion = {}, {}
    for t = 1, P do prompt[t] = row[t] end
    for t = P + 1, #row do completion[t - P] = row[t] end
    local r = self.reward(prompt, completion)
    if type(r) ~= "number" or r ~= r then
      fail("GRPO", "reward returned %s for completion %d; it must return a number", tostring(r), i)
    end
    rewards[i] = r
  end
  return seqs, rewards
end

-- one batch of prompts: sample, score, then inner_steps optimizer steps on the clipped
-- objective; returns the statistics of the last inner step, averaged over the ranks, with
-- reward (the mean reward of the samples) and solved (the share of groups with a nonzero
-- advantage, i.e. whose samples did not all score the same)
function GRPO:step(prompts)
  local seqs, rewards = self:rollout(prompts)
  local P = prompts.shape[2]
  local adv = posttrain.group_advantages(rewards, self.G):to(seqs.device)
  local ref = lab.no_grad(function() return posttrain.completion_logprobs(self.reference, seqs, P, "GRPO") end)
  -- the sampling policy's log-probabilities: with one step per batch they are the first
  -- step's own (detached), so no separate forward is needed (as TRL does for mu = 1)
  local old = self.mu > 1 and lab.no_grad(function() return posttrain.completion_logprobs(self.policy, seqs, P, "GRPO") end)
  local stats
  for _ = 1, self.mu do
    self.optimizer:zero_grad()
    local logp = posttrain.completion_logprobs(self.policy, seqs, P, "GRPO")
    old = old or logp:detach()
    local loss
    loss, stats = posttrain.grpo_loss(logp, old, ref, adv, self.clip, self.beta)
    loss:backward()
    self.optimizer:step()
  end
  local sum, informative = 0, 0
  for _, r in ipairs(rewards) do sum = sum + r end
  for s = 1, #rewards, self.G do
    for i = s + 1, s + self.G - 1 do
      if rewards[i] ~= rewards[s] then informative = informative + 1 break end
    end
  end
  stats.reward = sum / #rewards
  stats.informative = informative / (#rewards / self.G)
  return average(stats, self.group)
end

-- The mean reward of model's completions of prompts [B, P] (greedy by default, or sampled
-- with opts = generate's options), averaged over the ranks of opts.group (nil: this rank's).
function posttrain.mean_reward(model, prompts, reward, opts)
  errors.arg(type(model) == "table" and type(model.parameters) == "function", "lab.posttrain.mean_reward", 1,
    "a model (a lab.nn module or a wrapper of one)", model)
  errors.opts("lab.posttrain.mean_reward", 4, opts)
  opts = opts or {}
  check_seqs("mean_reward", "prompts", prompts)
  errors.type("lab.posttrain.mean_reward", 3, reward, "function", "a function reward(prompt, completion) -> number")
  local gen = { max_new_tokens = opts.max_new_tokens, temperature = opts.temperature, top_k = opts.top_k,
    greedy = opts.temperature == nil and opts.top_k == nil or nil }
  local P = prompts.shape[2]
  local rows = lab.generate(model, to_model(model, prompts), gen):tolist()
  local sum = 0
  for _, row in ipairs(rows) do
    local prompt, completion = {}, {}
    for t = 1, P do prompt[t] = row[t] end
    for t = P + 1, #row do completion[t - P] = row[t] end
    sum = sum + reward(prompt, completion)
  end
  local mean = sum / #rows
  if opts.group then mean = average({ m = mean }, opts.group).m end
  return mean
end

-- memory per rank and FLOPs per prompt of each method, from formulas (lab/posttrain_cost.lua)
posttrain.cost = require("lab.posttrain_cost")

return posttrain
