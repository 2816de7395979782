-- lab.optim: optimizers over a list of parameters, learning-rate schedules and gradient
-- clipping. Updates run inside lab.no_grad: they change parameters in place.
local errors = require("lab.errors")
local optim = {}

local Optimizer = {}
Optimizer.__index = Optimizer

function Optimizer:zero_grad()
  for _, p in ipairs(self.params) do p.grad = nil end
end

-- params: a list of tensors; opts: each given option has the type of its default
local function new(cls, name, params, defaults, opts)
  local fname = "lab.optim." .. name
  errors.arg(type(params) == "table" and not lab.nn.is_module(params), fname, 1,
    "a list of parameters (model:parameters())", params)
  for i, p in ipairs(params) do
    if not lab.is_tensor(p) then errors.raise(fname, "parameter %d is a %s, not a tensor", i, type(p)) end
  end
  errors.opts(fname, 2, opts)
  local self = setmetatable({ params = params, state = {}, step_count = 0 }, cls)
  opts = opts or {}
  for k, v in pairs(defaults) do
    if opts[k] ~= nil and type(opts[k]) ~= type(v) then
      errors.raise(fname, "option %s must be a %s, got %s", k, type(v), type(opts[k]))
    end
    if opts[k] == nil then self[k] = v else self[k] = opts[k] end
  end
  return self
end

-- SGD with momentum and Nesterov, as torch.optim.SGD:
--   g += wd p; b = mu b + g; g = nesterov and g + mu b or b; p -= lr g
local SGD = setmetatable({}, { __index = Optimizer })
SGD.__index = SGD
function optim.SGD(params, opts)
  return new(SGD, "SGD", params, { lr = 0.01, momentum = 0, nesterov = false, weight_decay = 0 }, opts)
end
function SGD:step()
  self.step_count = self.step_count + 1
  lab.no_grad(function()
    for i, p in ipairs(self.params) do
      local g = p.grad
      if g then
        if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
        if self.momentum ~= 0 then
          local buf = self.state[i]
          if not buf then
            buf = g:clone()
            lab.mem.tag(buf, "optimizer")
            self.state[i] = buf
          else
            buf:mul_(self.momentum):add_(g)
          end
          g = self.nesterov and (g + buf * self.momentum) or buf
        end
        p:sub_(g * self.lr)
      end
    end
  end)
end

-- AdamW with decoupled weight decay: one fused C pass over every parameter (one parallel
-- region for them all: a region per parameter cost a fork and join for each small bias)
local AdamW = setmetatable({}, { __index = Optimizer })
AdamW.__index = AdamW
function optim.AdamW(params, opts)
  errors.betas("AdamW", 2, type(opts) == "table" and opts.betas or nil)
  local self = new(AdamW, "AdamW", params, { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0.01 }, opts)
  return self
end
function AdamW:step()
  self.step_count = self.step_count + 1
  local hp = { lr = self.lr, beta1 = self.betas[1], beta2 = self.betas[2], eps = self.eps, step = self.step_count }
  local ps, ms, vs, decays = {}, {}, {}, {}
  for i, p in ipairs(self.params) do
    local s = self.state[i]
    if not s then
      s = { m = lab.zeros_like(p), v = lab.zeros_like(p) }
      lab.mem.tag(s.m, "optimizer")
      lab.mem.tag(s.v, "optimizer")
      self.state[i] = s
    end
    ps[i], ms[i], vs[i] = p, s.m, s.v
    -- biases and norm weights (1-D) are not decayed, as in GPT-2 / nanoGPT
    decays[i] = (p:dim() >= 2) and self.weight_decay or 0
  end
  lab._optim_c.adamw_multi(ps, ms, vs, hp, decays)
end

-- Linear warmup to lr, then cosine decay to min_lr at max_steps (nanoGPT's schedule).
function optim.warmup_cosine(step, opts)
  errors.arg(type(step) == "number", "lab.optim.warmup_cosine", 1, "a step number", step)
  errors.arg(type(opts) == "table" and type(opts.lr) == "number" and type(opts.max_steps) == "number",
    "lab.optim.warmup_cosine", 2, "a table {lr=, max_steps=, [warmup=], [min_lr=]}", opts)
  local lr, min_lr = opts.lr, opts.min_lr or 0
  local warmup, max_steps = opts.warmup or 0, opts.max_steps
  if step < warmup then return lr * (step + 1) / warmup end
  if step >= max_steps then return min_lr end
  local t = (step - warmup) / math.max(1, max_steps - warmup)
  return min_lr + 0.5 * (1 + math.cos(math.pi * t)) * (lr - min_lr)
end

-- Scales all gradients so their global L2 norm is at most max_norm; returns the norm
-- before clipping (as torch.nn.utils.clip_grad_norm_).
-- opts.group: a tensor-parallel group: the squares are summed over it, and a parameter not
-- marked tensor_model_parallel is a copy every rank of it holds (LayerNorms, the
-- row-parallel biases), counted once (on the group's rank 0), as Megatron-LM counts it.
-- opts.pipeline_group: the model's stages are spread over it: their sums are added.
function optim.clip_grad_norm(params, max_norm, opts)
  errors.arg(type(params) == "table", "lab.optim.clip_grad_norm", 1, "a list of parameters", params)
  for i, p in ipairs(params) do
    if not lab.is_tensor(p) then errors.raise("lab.optim.clip_grad_norm", "parameter %d is a %s, not a tensor", i, type(p)) end
  end
  errors.arg(type(max_norm) == "number", "lab.optim.clip_grad_norm", 2, "a number (max_norm)", max_norm)
  errors.opts("lab.optim.clip_grad_norm", 3, opts)
  opts = opts or {}
  local group, stages = opts.group, opts.pipeline_group
  local counts_here = not group or lab.dist.rank(group) == 0
  -- the sum of squares on the gradients' device, in f64 (each norm squared and added in the
  -- order and precision the host's loop used, so the cpu's value is bitwise the same), and one
  -- read-back for all of them: reading each norm stopped a GPU once per parameter
  local sq
  for _, p in ipairs(params) do
    local g = p.grad
    if g and (counts_here or p.tensor_model_parallel) then
      local n = g:norm():to("f64")
      if sq and n.device ~= sq.device then n = n:to(sq.device) end -- parameters on several devices
      sq = sq and sq + n * n or n * n
    end
  end
  for _, over in ipairs({ group or false, stages or false }) do
    if over then -- every rank reduces, the ones without gradients too (zeros on the parameters' device)
      sq = sq and sq:reshape(1):clone() or lab.zeros(1, { dtype = "f64", device = params[1] and params[1].device })
      lab.dist.all_reduce(sq, { group = over })
    end
  end
  local total = sq and sq:sum():item() or 0
  total = math.sqrt(total)
  if total > max_norm then
    local scale = max_norm / (total + 1e-6)
    lab.no_grad(function()
      for _, p in ipairs(params) do
        if p.grad then p.grad = p.grad * scale end
      end
    end)
  end
  return total
end

return optim
