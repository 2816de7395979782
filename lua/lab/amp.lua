-- lab.amp: mixed-precision training as Megatron-LM and apex do it ("O2").
--
--   local mp = lab.amp.MixedPrecision(model, {dtype = "f16",
--     optimizer = function(params) return lab.optim.AdamW(params, {lr = 1e-3}) end})
--   mp:zero_grad(); local loss = lm_loss(model(x), y); mp:backward(loss); mp:step()
--
-- Order: apply lab.lora before MixedPrecision (frozen weights are cast without a master,
-- the adapters get one) and wrap with lab.ddp / lab.zero after it.
--
-- The model's parameters are cast to bf16 or f16, so every matmul, activation and gradient
-- is 16-bit: half the memory and bandwidth. The optimizer does not see them: it updates
-- fp32 "master" copies and the 16-bit weights are re-cast from those after each step. A
-- 16-bit weight cannot absorb an update smaller than half its rounding step (bf16 keeps 8
-- significant bits: 1 + 2^-9 rounds back to 1), so without masters small learning rates
-- stop training altogether.
--
-- f16 has 5 exponent bits: gradients under 2^-24 flush to zero. A loss scale multiplies the
-- loss before backward, so every gradient is scaled by the same factor, and divides it out
-- in fp32. The scale is dynamic, as torch.cuda.amp.GradScaler's: a step whose gradients
-- overflowed (on any rank) is skipped and the scale halved; after growth_interval clean
-- steps it doubles. bf16 has fp32's exponent range and needs no scale (the default).
--
-- FP8 (fp8 = lab.amp.DelayedScaling{...}, see fp8.lua): on top of that, every lab.nn.Linear
-- computes its matrix products from FP8 operands (e4m3 weights and activations, e5m2
-- gradients), each tensor scaled by a factor recomputed after every step from its amax
-- history (Transformer Engine's delayed scaling); masters and optimizer stay as above.
local errors = require("lab.errors")
local replicas = require("lab.replicas")
local amp = {}
local fp8 = require("lab.fp8")
amp.DelayedScaling = fp8.DelayedScaling
amp.ScalingMeta = fp8.ScalingMeta
amp.FP8_FORMATS = fp8.FORMATS

local FLOAT16 = { bf16 = true, f16 = true }

-- the 16-bit parameters MixedPrecision made (weak keys), so lab.lora can refuse to add
-- adapters that no optimizer would see
amp.cast_by_amp = setmetatable({}, { __mode = "k" })

local MixedPrecision = {}
MixedPrecision.__index = MixedPrecision

-- Replaces the model's fp32 parameters with 16-bit copies, in place; returns the list of
-- {model = 16-bit parameter, master = the original fp32 one}. Tied parameters stay tied.
local function cast_parameters(model, dtype)
  local cast, pairs_list = {}, {}
  local function visit(m)
    for _, name in ipairs(m._names) do
      local kind, v = m._kinds[name], m[name]
      if kind == "module" then visit(v)
      elseif kind == "param" and v ~= nil then
        local low = cast[v]
        local wrapper = lab.ddp.reduced_by[v]
        if wrapper then -- its hooks stay on the fp32 tensor, which no longer gets gradients
          error(string.format("rank %d: amp.MixedPrecision: parameter %s is already reduced by %s; apply "
            .. "MixedPrecision first and wrap afterwards, so the wrapper reduces the 16-bit gradients",
            lab.dist.rank(), name, wrapper), 0)
        end
        if not low then
          if v.dtype ~= "f32" then
            error(string.format("rank %d: amp: parameter %s is %s; MixedPrecision starts from an f32 model",
              lab.dist.rank(), name, v.dtype), 0)
          end
          low = lab.no_grad(function() return v:to(dtype) end)
          -- the tensor-parallel marks go with it (Megatron's copy_tensor_model_parallel_attributes)
          for _, a in ipairs({ "tensor_model_parallel", "partition_dim", "partition_stride", "sequence_parallel", "shared" }) do
            low[a] = v[a]
          end
          cast[v] = low
          amp.cast_by_amp[low] = true
          if v.requires_grad then
            lab.mem.tag(v, "optimizer") -- the ZeRO paper counts the fp32 master with the optimizer
            pairs_list[#pairs_list + 1] = { model = low, master = v }
          end -- a frozen parameter (LoRA's base) is only cast: no master, no optimizer state
        end
        m:param(name, low)
        if not v.requires_grad then low:requires_grad_(false) end -- frozen stays frozen
      end
    end
  end
  visit(model)
  return pairs_list
end

function amp.MixedPrecision(model, opts)
  opts = errors.with_opts("amp.MixedPrecision", errors.module, opts, model)
  local dtype = opts.dtype or "bf16"
  if not FLOAT16[dtype] then
    error(string.format("rank %d: amp.MixedPrecision: dtype must be bf16 or f16, not %s", lab.dist.rank(),
      tostring(dtype)), 0)
  end
  if type(opts.optimizer) ~= "function" then
    error(string.format("rank %d: amp.MixedPrecision: pass optimizer = function(master_params) ... end",
      lab.dist.rank()), 0)
  end
  local scaling = opts.loss_scale
  if scaling == nil then scaling = dtype == "f16" and "dynamic" or 1 end
  local self = setmetatable({
    model = model, dtype = dtype, group = opts.group,
    dynamic = scaling == "dynamic",
    scale = scaling == "dynamic" and (opts.init_scale or 2.0 ^ 16) or scaling,
    growth_factor = opts.growth_factor or 2, backoff_factor = opts.backoff_factor or 0.5,
    growth_interval = opts.growth_interval or 2000,
    clean_steps = 0, skipped = 0, steps = 0,
  }, MixedPrecision)
  self.pairs = cast_parameters(model, dtype)
  if opts.fp8 then
    local recipe = opts.fp8 == true and fp8.DelayedScaling() or opts.fp8
    if not fp8.is_recipe(recipe) then
      error(string.format("rank %d: amp.MixedPrecision: fp8 must be true or a lab.amp.DelayedScaling{...}, got %s",
        lab.dist.rank(), type(opts.fp8)), 0)
    end
    if #recipe.metas > 0 then
      error(string.format("rank %d: amp.MixedPrecision: this DelayedScaling already serves another model; "
        .. "make one per model", lab.dist.rank()), 0)
    end
    if fp8.apply(model, recipe) == 0 then
      error(string.format("rank %d: amp.MixedPrecision: fp8: the model has no lab.nn.Linear to compute in FP8",
        lab.dist.rank()), 0)
    end
    self.fp8 = recipe
  end
  local masters = {}
  for i, pr in ipairs(self.pairs) do masters[i] = pr.master end
  self.master_params = masters
  self.optimizer = opts.optimizer(masters)
  return replicas.register(self, "lab.amp.MixedPrecision", MixedPrecision.zero_grad)
end

function MixedPrecision:zero_grad()
  for _, pr in ipairs(self.pairs) do
    pr.model.grad = nil
    pr.master.grad = nil
  end
end

-- backward of loss * scale; the loss is taken to fp32 first so the scaled value cannot
-- overflow f16 (2^16 times a loss of 1 already would)
function MixedPrecision:backward(loss)
  replicas.touch(self) -- a step cut short drops its half-made gradients (zero_grad, from lab.replicas)
  local l = loss:to("f32")
  if self.scale ~= 1 then l = l * self.scale end
  l:backward()
end

-- Unscales the 16-bit gradients into the fp32 masters' .grad and says whether all are
-- finite on every rank of the group (each rank may hold different gradients: ZeRO, TP).
-- As GradScaler's found_inf, the check stays on the device until the one read-back that
-- decides the step: the f64 sum of every gradient's f32 sum is finite exactly when each of
-- those is (a finite f32 sum cannot overflow an f64 total), so reading each sum, which
-- stopped a GPU once per parameter, is not needed.
function MixedPrecision:unscale()
  local inv, total, dev = 1 / self.scale, nil, nil
  lab.no_grad(function()
    for _, pr in ipairs(self.pairs) do
      local g = pr.model.grad
      if g then
        local g32 = g:to("f32")
        if inv ~= 1 then g32 = g32 * inv end
        pr.master.grad = g32
        dev = dev or g32.device
        if self.dynamic then
          local s = g32:sum():to("f64") -- NaN or inf if any element is
          if total and s.device ~= total.device then s = s:to(total.device) end -- several devices
          total = total and total + s or s
        end
      else
        pr.master.grad = nil
      end
    end
  end)
  if not self.dynamic then return true end
  -- 1 where the total is NaN or infinite (t - t is NaN there, 0 elsewhere), on the device
  local flag
  if total then
    local d = total - total
    flag = d:ne(d):to("f32"):reshape(1)
  else
    flag = lab.zeros(1, { dtype = "f32", device = dev or (self.pairs[1] and self.pairs[1].master.device) })
  end
  if lab.dist.world_size() > 1 then
    lab.dist.all_reduce(flag, { op = "max", group = self.group })
  end
  return flag:item() == 0
end

-- One optimizer step on the masters, then the 16-bit weights re-cast from them. Returns
-- false when the step was skipped for an overflow (the scale is then lowered).
function MixedPrecision:step(opts)
  -- this step's amaxes enter the FP8 histories whether or not the step is skipped (as TE)
  if self.fp8 then self.fp8:update(self.group) end
  local finite = self:unscale()
  self.steps = self.steps + 1
  if not finite then
    self.skipped = self.skipped + 1
    self.scale = self.scale * self.backoff_factor
    self.clean_steps = 0
    for _, pr in ipairs(self.pairs) do pr.master.grad = nil end
    return false
  end
  -- the global norm of the unscaled gradients, before clipping (as clip_grad_norm's); with
  -- opts.group the model is split over that group (tensor parallelism) and so is the norm
  if opts and opts.clip then
    self.grad_norm = lab.optim.clip_grad_norm(self.master_params, opts.clip, { group = opts.group })
  end
  self.optimizer:step()
  self:sync_model()
  if self.dynamic then
    self.clean_steps = self.clean_steps + 1
    if self.clean_steps >= self.growth_interval then
      self.scale = self.scale * self.growth_factor
      self.clean_steps = 0
    end
  end
  return true
end

-- what a checkpoint needs besides the optimizer: the scaler's state
-- (and with FP8 every tensor's scale and amax history, so FP8 training resumes bit for bit)
function MixedPrecision:scaler_state()
  return { scale = self.scale, clean_steps = self.clean_steps, skipped = self.skipped, steps = self.steps,
    fp8 = self.fp8 and self.fp8:save_state() or nil }
end

-- raises naming what in a checkpoint's scaler state does not fit this run (checked before a
-- load changes anything); FP8 state in a run without FP8, or none in an FP8 run, is fine:
-- precision may change at a resume, the scales then start afresh
function MixedPrecision:check_scaler_state(s)
  if self.fp8 and s.fp8 ~= nil then self.fp8:check_state(s.fp8) end
end

function MixedPrecision:load_scaler_state(s)
  self.scale, self.clean_steps, self.skipped, self.steps = s.scale, s.clean_steps, s.skipped, s.steps
  if self.fp8 and s.fp8 ~= nil then self.fp8:load_state(s.fp8) end
end

-- re-casts the 16-bit weights from the masters (after loading masters from a checkpoint)
function MixedPrecision:sync_model()
  lab.no_grad(function()
    for _, pr in ipairs(self.pairs) do pr.model:copy_(pr.master) end
  end)
end

function MixedPrecision:__tostring()
  return string.format("MixedPrecision(%s%s, %d tensors, loss scale %s%s, %d of %d steps skipped)", self.dtype,
    self.fp8 and (" + FP8 " .. self.fp8.fp8_format) or "", #self.pairs, tostring(self.scale),
    self.dynamic and " dynamic" or "", self.skipped, self.steps)
end

return amp
