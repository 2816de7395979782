-- lab.posttrain.cost{method=, params=, ...}: the memory per rank and the FLOPs per prompt of
-- a post-training method, from rules a reader can check; lab 12 checks the memory part
-- against what lab.mem measures on a small model, then applies it to 7B and 70B.
--
--   lab.posttrain.cost{method = "dpo", params = 7e9, mixed_precision = true}
--   --> {weights=, grads=, optimizer=, reference=, value=, reward_model=, total=, flops=, models=}
--
-- Memory (bytes per rank; no activations, no KV cache, which depend on batch and sequence):
-- a trained model holds its weights, gradients and Adam state as lab.mem.estimate counts them
-- (f32: 4 + 4 + 8 bytes per parameter; mixed precision: 2 + 2 + 12 with the fp32 master in
-- the optimizer); a frozen model holds only its weights (2 bytes in bf16, 4 in f32, 0.5 for
-- QLoRA's 4-bit base). SFT trains the policy. LoRA freezes it and trains adapters of
-- `trainable` parameters (default lora_fraction = 0.5% of params, r = 16 on a Llama's
-- matrices). DPO and GRPO add a frozen reference of the policy's size; PPO adds a frozen
-- reward model and a trained value model (the policy's size unless value_params= says).
-- ZeRO (zero = 1..3 over dp ranks) shards the trained state as lab.mem.estimate does; at
-- stage 3 the frozen models' weights are sharded too.
--
-- FLOPs per prompt of `prompt` tokens with responses of `response` tokens (L = P + R), in
-- the 2N (forward) / 6N (forward and backward) rule per token: SFT 6L; LoRA 4L (backward to
-- the activations only); DPO 2 x (6L + 2L) (chosen and rejected, the reference's forward);
-- PPO 2R (generation, with a KV cache: 2N per new token) + 3 x 2L (reference, reward, value
-- forward) + 2 x 6L (policy and value trained); GRPO G x (2R + 2L + 6L).
local BYTES = { f32 = 4, bf16 = 2, f16 = 2, f64 = 8 }
local METHODS = { sft = true, lora = true, qlora = true, dpo = true, ppo = true, grpo = true }
local KNOWN = { method = true, params = true, dtype = true, mixed_precision = true, trainable = true,
  lora_fraction = true, value_params = true, reward_params = true, zero = true, dp = true,
  prompt = true, response = true, group = true }

local function fail(fmt, ...)
  error(string.format("rank %d: posttrain.cost: " .. fmt, lab.dist.rank(), ...), 0)
end

local function positive(o, k, default)
  local v = o[k]
  if v == nil then return default end
  if type(v) ~= "number" or not (v > 0) or v == math.huge then fail("%s must be a positive number, got %s", k, tostring(v)) end
  return v
end

local function check(o)
  if type(o) ~= "table" then fail("takes a table {method=, params=, ...}, got %s", type(o)) end
  for k in pairs(o) do
    if not KNOWN[k] then fail("unknown option %s", tostring(k)) end
  end
  if not METHODS[o.method] then
    fail("method must be one of sft, lora, qlora, dpo, ppo, grpo; got %s", tostring(o.method))
  end
  positive(o, "params")
  if o.params == nil then fail("params (the policy's parameter count) is required") end
  if o.dtype ~= nil and not BYTES[o.dtype] then fail("dtype must be f32, bf16, f16 or f64, got %s", tostring(o.dtype)) end
  if o.mixed_precision and o.dtype and o.dtype ~= "f32" then
    fail("mixed_precision=true keeps bf16 weights and fp32 masters; dtype=%s says otherwise", o.dtype)
  end
  local zero = o.zero or 0
  if math.type(zero) ~= "integer" or zero < 0 or zero > 3 then fail("zero must be 0, 1, 2 or 3, got %s", tostring(zero)) end
  local dp = o.dp or 1
  if math.type(dp) ~= "integer" or dp < 1 then fail("dp must be an integer >= 1, got %s", tostring(dp)) end
  local lf = positive(o, "lora_fraction", 0.005)
  if lf >= 1 then fail("lora_fraction must be below 1, got %g", lf) end
  if o.trainable ~= nil and (positive(o, "trainable") >= o.params) then
    fail("trainable (%g) must be fewer than params (%g)", o.trainable, o.params)
  end
  for _, k in ipairs({ "value_params", "reward_params", "prompt", "response" }) do positive(o, k) end
  local G = o.group or 8
  if math.type(G) ~= "integer" or G < 1 then fail("group must be an integer >= 1, got %s", tostring(G)) end
  return zero, dp, G
end

return function(o)
  local zero, dp, G = check(o)
  local N, method = o.params, o.method
  local mp = o.mixed_precision == true
  local wbytes = mp and 2 or BYTES[o.dtype or "f32"]
  local function trained(n)
    return lab.mem.estimate { params = n, dtype = o.dtype, mixed_precision = mp, zero = zero, dp = dp }
  end
  local function frozen(n, bytes_per) return (bytes_per or wbytes) * n / (zero >= 3 and dp or 1) end
  local c = { method = method, params = N, weights = 0, grads = 0, optimizer = 0, reference = 0, value = 0,
    reward_model = 0 }
  if method == "lora" or method == "qlora" then
    local n_a = o.trainable or (o.lora_fraction or 0.005) * N
    local t = trained(n_a)
    c.trainable = n_a
    c.weights = frozen(N, method == "qlora" and 0.5 or nil) + t.params
    c.grads, c.optimizer = t.grads, t.optimizer
    c.models = method == "qlora" and "4-bit frozen base + adapters" or "frozen base + adapters"
  else
    local t = trained(N)
    c.trainable = N
    c.weights, c.grads, c.optimizer = t.params, t.grads, t.optimizer
    c.models = "policy trained"
    if method == "dpo" or method == "grpo" or method == "ppo" then
      c.reference = frozen(N)
      c.models = "policy + frozen reference"
    end
    if method == "grpo" then c.models = c.models .. ", no value model" end
    if method == "ppo" then
      c.value = trained(o.value_params or N).total
      c.reward_model = frozen(o.reward_params or N)
      c.models = "policy, value trained; reference, reward frozen"
    end
  end
  c.total = c.weights + c.grads + c.optimizer + c.reference + c.value + c.reward_model
  local P, R = o.prompt or 512, o.response or 512
  local L = P + R
  local per_token = ({
    sft = 6 * L,
    lora = 4 * L,
    qlora = 4 * L,
    dpo = 2 * (6 * L + 2 * L),
    ppo = 2 * R + 3 * 2 * L + 2 * 6 * L,
    grpo = G * (2 * R + 2 * L + 6 * L),
  })[method]
  c.flops = per_token * N
  c.flops_in_N = per_token
  return c
end
