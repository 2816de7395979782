-- FP8 matrix products with per-tensor delayed scaling, as NVIDIA Transformer Engine's
-- DelayedScaling recipe does them (the FP8 part of lab.amp; amp.lua calls it).
--
--   local recipe = lab.amp.DelayedScaling{margin = 0, amax_history_len = 16, fp8_format = "hybrid"}
--   local mp = lab.amp.MixedPrecision(model, {dtype = "bf16", fp8 = recipe, optimizer = ...})
--
-- Every lab.nn.Linear of the model then computes y = x W^T + b as TE's Linear does:
--   forward:  xq = e4m3(x * s_x), wq = e4m3(W * s_w),  y = (xq @ wq^T) / (s_x s_w) + b
--   backward: gq = e5m2(dy * s_g),  dx = (gq @ wq) / (s_g s_w),  dW = (gq^T @ xq) / (s_g s_x)
-- fp8_format "hybrid" is e4m3 in forward and e5m2 (more range, less precision) for gradients;
-- "e4m3" uses e4m3 for all three. xq, wq and gq are real f8e4m3/f8e5m2 tensors, kept for
-- backward in that form (1 byte per element); each product is computed from them widened to
-- f32 on the CPU, which is the arithmetic of an FP8 tensor-core GEMM (exact products, f32
-- accumulation, the dequantisation factor applied to the result). The bias, every other op
-- (embeddings, norms, attention, the tied LM head), the master weights and the optimizer are
-- as in bf16 training.
--
-- Delayed scaling: a tensor's scale comes from the amaxes (max |value|) of earlier steps, not
-- of the tensor being cast, so the cast needs no pass over the data first (on a GPU the cast
-- kernel computes the amax for later steps as it goes). After each step (recipe:update(group),
-- called by mp:step()) every tensor's amax of the step enters its history (a ring of
-- amax_history_len steps), reduced with max over the group so every rank casts with the same
-- scale, and
--     scale = (fp8_max / amax) / 2^margin,  amax = max(history)  (amax_compute_algo "max")
--                                           amax = the newest    ("most_recent")
-- kept as it was when amax is 0 or not finite; the first step casts with scale 1. The cast
-- saturates: a value above fp8_max / scale becomes +-fp8_max (counted in meta.clipped). A step
-- whose amax jumps past its history clips; the history then keeps the scale low for
-- amax_history_len steps, so spikes that recur within that window are not clipped again.
local errors = require("lab.errors")
local fp8 = {}

fp8.FORMATS = {
  e4m3 = { dtype = "f8e4m3", max = 448 },
  e5m2 = { dtype = "f8e5m2", max = 57344 },
}

local function rank() return lab.dist.rank() end

-- ---- one tensor's scaling state ----
local Meta = {}
Meta.__index = Meta

-- name: for reports ("blocks.1.attn.qkv.x"); format: "e4m3" or "e5m2"
function fp8.ScalingMeta(name, format, recipe)
  local f = fp8.FORMATS[format]
  if not f then
    error(string.format("rank %d: amp.ScalingMeta: format must be e4m3 or e5m2, not %s", rank(), tostring(format)), 0)
  end
  recipe = recipe or fp8.DelayedScaling()
  return setmetatable({ name = name, format = format, dtype = f.dtype, fp8_max = f.max, scale = 1.0,
    history = {}, pos = 0, len = recipe.amax_history_len, margin = recipe.margin,
    algo = recipe.amax_compute_algo, amax_step = nil, clipped = 0 }, Meta)
end

-- Casts t (any float dtype) to FP8 with the current scale and remembers its amax for the
-- next update. Returns the FP8 tensor and the dequantisation factor 1/scale.
function Meta:cast(t)
  local t32 = t:to("f32")
  local amax = t32:abs():max():item()
  if amax ~= amax or not self.amax_step or amax > self.amax_step then self.amax_step = amax end
  if amax * self.scale > self.fp8_max then -- saturated elements, for reports (only when some are)
    self.clipped = self.clipped + (t32:abs() * self.scale):gt(self.fp8_max):sum():item()
  end
  local q = (t32 * self.scale):to(self.dtype)
  self.bytes, self.numel = q:nbytes(), q:numel() -- the last cast's storage, for reports
  return q, 1 / self.scale
end

-- one step's amax (already reduced over the group) into the history; the scale from it
function Meta:push(amax)
  self.pos = self.pos % self.len + 1
  self.history[self.pos] = amax
  local a = amax
  if self.algo == "max" then
    for _, h in ipairs(self.history) do
      if h ~= h or h > a then a = h end
    end
  end
  self.amax = a
  if a > 0 and a < math.huge then self.scale = (self.fp8_max / a) / 2 ^ self.margin end
  self.amax_step = nil
end

-- the history, oldest first
function Meta:amax_history()
  local out, n = {}, #self.history
  for k = 1, n do out[k] = self.history[(self.pos + k - 1) % n + 1] end
  return out
end

function Meta:__tostring()
  return string.format("ScalingMeta(%s, %s, scale %.6g, %d amaxes, %d clipped)", self.name, self.format,
    self.scale, #self.history, self.clipped)
end

-- ---- the recipe: options and every meta of one model ----
local Recipe = {}
Recipe.__index = Recipe

function fp8.DelayedScaling(opts)
  errors.opts("amp.DelayedScaling", 1, opts)
  opts = opts or {}
  local function bad(fmt, ...) error(string.format("rank %d: amp.DelayedScaling: " .. fmt, rank(), ...), 0) end
  local self = setmetatable({
    margin = opts.margin or 0,
    amax_history_len = opts.amax_history_len or 1024, -- Transformer Engine's default
    amax_compute_algo = opts.amax_compute_algo or "max",
    fp8_format = opts.fp8_format or "hybrid",
    metas = {},
  }, Recipe)
  if type(self.margin) ~= "number" or self.margin < 0 or self.margin ~= self.margin then
    bad("margin must be a number >= 0, got %s", tostring(opts.margin))
  end
  if math.type(self.amax_history_len) ~= "integer" or self.amax_history_len < 1 then
    bad("amax_history_len must be an integer >= 1, got %s", tostring(opts.amax_history_len))
  end
  if self.amax_compute_algo ~= "max" and self.amax_compute_algo ~= "most_recent" then
    bad("amax_compute_algo must be 'max' or 'most_recent', got %s", tostring(opts.amax_compute_algo))
  end
  if self.fp8_format ~= "hybrid" and self.fp8_format ~= "e4m3" then
    bad("fp8_format must be 'hybrid' (e4m3 forward, e5m2 gradients) or 'e4m3', got %s", tostring(opts.fp8_format))
  end
  return self
end
fp8.is_recipe = function(x) return getmetatable(x) == Recipe end

function Recipe:meta(name, format)
  local m = fp8.ScalingMeta(name, format, self)
  self.metas[#self.metas + 1] = m
  return m
end

-- After a step: each meta's amax of the step, reduced with max over the group (one
-- all-reduce for all of them, as TE's fused amax reduction), enters its history. A meta no
-- rank used this step (-1 everywhere) keeps its history. Collective over group.
function Recipe:update(group)
  local amaxes = {}
  for i, m in ipairs(self.metas) do
    local a = m.amax_step or -1
    if a ~= a then a = math.huge end -- NaN: MPI's max is undefined on it; inf keeps the scale too
    amaxes[i] = a
  end
  if #amaxes > 0 and lab.dist.world(group) > 1 then
    local t = lab.tensor(amaxes, { dtype = "f64" })
    lab.dist.all_reduce(t, { op = "max", group = group })
    amaxes = t:tolist()
  end
  for i, m in ipairs(self.metas) do
    if amaxes[i] >= 0 then m:push(amaxes[i]) end
  end
end

-- ---- checkpoints: every meta's scale and history, as JSON-able data ----
-- (an infinite amax is stored as "inf": JSON has no infinity; NaN never enters a history)
local function enc(a) return a == math.huge and "inf" or a end
local function dec(a) return a == "inf" and math.huge or a end

function Recipe:save_state()
  local out = {}
  for i, m in ipairs(self.metas) do
    local h = {}
    for k, a in ipairs(m.history) do h[k] = enc(a) end
    out[i] = { name = m.name, scale = m.scale, amax = m.amax and enc(m.amax) or nil, pos = m.pos, history = h,
      clipped = m.clipped }
  end
  return out
end

-- raises "rank N: amp.DelayedScaling:check_state: ..." unless list fits these metas (ckpt.load
-- replaces the rank with its own report naming every rank and the path)
function Recipe:check_state(list)
  local function bad(fmt, ...)
    error(string.format("rank %d: amp.DelayedScaling:check_state: " .. fmt, rank(), ...), 0)
  end
  if type(list) ~= "table" or #list ~= #self.metas then
    bad("its FP8 state has %s scaled tensors, this model %d", type(list) == "table" and #list or "no", #self.metas)
  end
  for i, m in ipairs(self.metas) do
    local e = list[i]
    if type(e) ~= "table" or e.name ~= m.name then
      bad("FP8 tensor %d is %s in the checkpoint, %s in this model", i, type(e) == "table" and tostring(e.name) or "missing",
        m.name)
    end
    if type(e.scale) ~= "number" or not (e.scale > 0 and e.scale < math.huge) or type(e.history) ~= "table"
      or #e.history > m.len or math.type(e.pos) ~= "integer" or e.pos < 0 or e.pos > #e.history then
      bad("FP8 state of %s is damaged or kept a longer amax history (%s steps) than this recipe (%d)", m.name,
        type(e.history) == "table" and #e.history or "?", m.len)
    end
  end
end

function Recipe:load_state(list)
  self:check_state(list)
  for i, m in ipairs(self.metas) do
    local e = list[i]
    m.history = {}
    for k, a in ipairs(e.history) do m.history[k] = dec(a) end
    m.scale, m.pos, m.amax, m.clipped, m.amax_step = e.scale, e.pos, e.amax and dec(e.amax), e.clipped or 0, nil
  end
end

-- {name = {scale=, amax_history=, clipped=}} for reports
function Recipe:state()
  local out = {}
  for _, m in ipairs(self.metas) do
    out[m.name] = { scale = m.scale, amax_history = m:amax_history(), clipped = m.clipped }
  end
  return out
end

function Recipe:__tostring()
  return string.format("DelayedScaling(%s, margin %g, amax_history_len %d, %s, %d tensors)", self.fp8_format,
    self.margin, self.amax_history_len, self.amax_compute_algo, #self.metas)
end

-- ---- the FP8 linear ----
-- y2d = x2d W^T from FP8 operands; backward casts dy to the gradient format
local LinearFP8 = lab.autograd.Function {
  forward = function(ctx, x, w, lin)
    local xq, dx = lin.fp8_x:cast(x)
    local wq, dw = lin.fp8_w:cast(w)
    ctx.xq, ctx.wq, ctx.dx, ctx.dw, ctx.lin, ctx.xdtype, ctx.wdtype = xq, wq, dx, dw, lin, x.dtype, w.dtype
    return (xq:to("f32"):matmul(wq:to("f32"):t()) * (dx * dw)):to(x.dtype)
  end,
  backward = function(ctx, g)
    local gq, dg = ctx.lin.fp8_g:cast(g)
    local g32 = gq:to("f32")
    local gx = (g32:matmul(ctx.wq:to("f32")) * (dg * ctx.dw)):to(ctx.xdtype)
    local gw = (g32:t():matmul(ctx.xq:to("f32")) * (dg * ctx.dx)):to(ctx.wdtype)
    return gx, gw
  end,
}

-- the forward an FP8 Linear gets (nn.linear's folding of leading dims, the product in FP8)
local function forward_fp8(self, x)
  local shape = x.shape
  local flat = #shape == 2 and x or x:reshape(-1, shape[#shape])
  local y = LinearFP8(flat, self.weight, self)
  if self.bias then y = y + self.bias end
  if #shape ~= 2 then
    shape[#shape] = self.weight.shape[1]
    y = y:view(shape)
  end
  return y
end

-- Gives every lab.nn.Linear of model (by class, not subclasses such as the TP layers or
-- LoRALinear) its three metas and the FP8 forward. Returns the number of Linears.
function fp8.apply(model, recipe)
  local fwd_fmt, bwd_fmt = "e4m3", recipe.fp8_format == "hybrid" and "e5m2" or "e4m3"
  local count = 0
  local function visit(m, path)
    if getmetatable(m) == lab.nn.Linear then
      if m.fp8_x then
        error(string.format("rank %d: amp.MixedPrecision: %s already computes in FP8", rank(), path), 0)
      end
      m.fp8_x = recipe:meta(path .. ".x", fwd_fmt)
      m.fp8_w = recipe:meta(path .. ".weight", fwd_fmt)
      m.fp8_g = recipe:meta(path .. ".grad_output", bwd_fmt)
      m.forward = forward_fp8
      count = count + 1
    end
    for _, name in ipairs(m._names) do
      if m._kinds[name] == "module" then visit(m[name], path == "" and name or path .. "." .. name) end
    end
  end
  visit(model, "")
  return count
end

return fp8
