-- lab.lora: low-rank adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large
-- Language Models").
--
--   local trainable = lab.lora.apply(model, {r = 8, alpha = 16, targets = {"qkv", "fc"}})
--   local opt = lab.optim.AdamW(trainable, {lr = 1e-3})
--   ... train ...;  lab.lora.merge(model)   -- plain Linears again, for serving
--
-- Fine-tuning changes weights by updates of low "intrinsic rank", so instead of training
-- W (out x in) LoRA freezes it and trains B (out x r) and A (r x in), adding
-- (alpha / r) x A^T B^T to the layer's output. B starts at zero, so training starts from
-- the base model exactly. Only A and B get gradients and optimizer moments: for r much
-- smaller than in and out, the fine-tuning state shrinks from 16 bytes per parameter to
-- the 2 (bf16) or 4 (f32) bytes of the frozen weights, and the backward pass skips the
-- weight gradients of every frozen matrix.
local errors = require("lab.errors")
local lora = {}
local nn = lab.nn

local LoRALinear = nn.class("LoRALinear")
nn.LoRALinear = LoRALinear
function LoRALinear:init(base, opts)
  if getmetatable(base) ~= nn.Linear then
    error(string.format("rank %d: LoRALinear: wraps a lab.nn.Linear, got %s", lab.dist.rank(),
      nn.is_module(base) and "another module" or type(base)), 0)
  end
  if lab.amp.cast_by_amp[base.weight] then
    error(string.format("rank %d: LoRALinear: this layer was already cast by lab.amp.MixedPrecision, whose "
      .. "optimizer would never see the adapters; apply lab.lora first", lab.dist.rank()), 0)
  end
  errors.opts("LoRALinear", 2, opts)
  opts = opts or {}
  local r = opts.r or 8
  errors.arg(opts.alpha == nil or (type(opts.alpha) == "number" and opts.alpha == opts.alpha), "LoRALinear", 2,
    "opts.alpha: a number", opts.alpha)
  if math.type(r) ~= "integer" or r < 1 or r > math.min(base.n_in, base.n_out) then
    error(string.format("rank %d: LoRALinear: r must be an integer in [1, %d] for a %d -> %d layer, got %s",
      lab.dist.rank(), math.min(base.n_in, base.n_out), base.n_in, base.n_out, tostring(r)), 0)
  end
  self.r, self.alpha = r, opts.alpha or r
  self.scaling = self.alpha / r
  self.n_in, self.n_out = base.n_in, base.n_out
  self:add("base", base)
  for _, p in ipairs(base:parameters()) do p:requires_grad_(false) end
  local bound = 1 / math.sqrt(base.n_in) -- A as a Linear's weight would be; B zero
  local dtype, device = base.weight.dtype, base.weight.device -- beside the base weight
  self:param("lora_A", lab.empty(r, base.n_in, { dtype = dtype, device = device }):uniform_(-bound, bound))
  self:param("lora_B", lab.zeros(base.n_out, r, { dtype = dtype, device = device }))
end
function LoRALinear:describe()
  return string.format("%d -> %d, r %d, alpha %g", self.n_in, self.n_out, self.r, self.alpha)
end
function LoRALinear:forward(x)
  local d = nn.linear(nn.linear(x, self.lora_A), self.lora_B) -- through the r-wide bottleneck
  if self.scaling ~= 1 then d = d * self.scaling end
  return self.base(x) + d
end

-- folds the adapter into the frozen weight: W += (alpha / r) B A; returns the plain Linear
function LoRALinear:merged()
  lab.no_grad(function()
    self.base.weight:add_(self.lora_B:matmul(self.lora_A) * self.scaling)
  end)
  return self.base
end

local function is_linear(m) return getmetatable(m) == nn.Linear end

-- Wraps the model's Linear layers (all of them, or those whose name is in opts.targets)
-- in LoRALinear and freezes every other parameter; returns the trainable parameters.
function lora.apply(model, opts)
  nn.check_module(model, "lora.apply")
  errors.opts("lab.lora.apply", 2, opts)
  opts = opts or {}
  local wanted
  if opts.targets then
    wanted = {}
    for _, t in ipairs(opts.targets) do wanted[t] = true end
  end
  for _, p in ipairs(model:parameters()) do p:requires_grad_(false) end
  local count = 0
  local function visit(m)
    for _, name in ipairs(m._names) do
      local child = m[name]
      if m._kinds[name] == "module" then
        if is_linear(child) and (not wanted or wanted[name]) then
          m:add(name, LoRALinear(child, opts))
          count = count + 1
        else
          visit(child)
        end
      end
    end
  end
  visit(model)
  if count == 0 then
    error(string.format("rank %d: lora.apply: no Linear layer matched%s", lab.dist.rank(),
      opts.targets and (" targets {" .. table.concat(opts.targets, ", ") .. "}") or ""), 0)
  end
  return lora.trainable(model)
end

-- the parameters that require gradients
function lora.trainable(model)
  errors.module("lab.lora.trainable", 1, model)
  local out = {}
  for _, p in ipairs(model:parameters()) do
    if p.requires_grad then out[#out + 1] = p end
  end
  return out
end

-- replaces every LoRALinear by its merged Linear (same outputs, no adapter cost)
function lora.merge(model)
  errors.module("lab.lora.merge", 1, model)
  local function visit(m)
    for _, name in ipairs(m._names) do
      local child = m[name]
      if m._kinds[name] == "module" then
        if getmetatable(child) == LoRALinear then m:add(name, child:merged())
        else visit(child) end
      end
    end
  end
  visit(model)
  return model
end

return lora
