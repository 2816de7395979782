-- lab.zero: ZeRO data parallelism (Rajbhandari et al., 2020), as DeepSpeed's stages 1-3.
--
-- Data parallelism keeps N copies of everything. With mixed-precision Adam that is 16 bytes
-- per parameter on every rank (parameters, gradients, two optimizer moments); ZeRO stores
-- each piece once across the N ranks:
--   stage 1  optimizer states sharded: gradients are reduce-scattered instead of all-reduced,
--            each rank updates only its 1/N of the parameters with its 1/N of the moments,
--            and the updated parameters are all-gathered back;
--   stage 2  gradients sharded too: each bucket is reduce-scattered as soon as backward has
--            filled it and the full gradients are freed, so only 1/N of them stays;
--   stage 3  parameters sharded: each module's parameters are all-gathered just before its
--            forward (and again before its backward), and freed after; the next module's are
--            prefetched while this one computes.
-- Communication per step: stages 1 and 2 move what DDP's all-reduce moves (a reduce-scatter
-- plus an all-gather is an all-reduce); stage 3 all-gathers twice, 1.5x DDP's volume.
--
-- A parameter used by several modules (a tied embedding and output head) is marked
-- p.shared = true by whoever ties it (as Megatron-LM marks its shared embedding). Stage 3
-- gives such parameters one group owned by the whole model, as FSDP puts a shared parameter
-- in the unit of the modules' common ancestor: gathered from the start of the model's
-- forward to its end, and from the start of backward until its gradient, summed over every
-- use, is reduced once.
--
-- The engine owns the optimizer (AdamW): engine:step() replaces optimizer:step().
-- Parameters are partitioned in groups (buckets for stages 1-2, modules for stage 3); every
-- group is one flat buffer padded to a multiple of N, and rank r owns slice r of each group.
local errors = require("lab.errors")
local replicas = require("lab.replicas")
local zero = {}

local Engine = {}
Engine.__index = Engine

local function modules_with_params(model, out)
  out = out or {}
  local own = false
  for _, n in ipairs(model._names) do
    if model._kinds[n] == "param" and model[n] ~= nil then own = true end
  end
  if own then out[#out + 1] = model end
  for _, c in ipairs(model:children()) do modules_with_params(c, out) end
  return out
end

-- opts: stage (1, 2, 3), lr, betas, eps, weight_decay (AdamW; not on 1-D parameters),
-- clip (global-norm clipping), bucket_mb (25, stages 1-2), group
function zero.wrap(model, opts)
  opts = errors.with_opts("lab.zero.wrap", errors.module, opts, model)
  errors.group("lab.zero.wrap", 2, opts.group, "opts.group: a process group")
  errors.betas("lab.zero.wrap", 2, opts.betas)
  for _, k in ipairs({ "bucket_mb", "lr", "eps", "weight_decay", "clip" }) do
    errors.arg(opts[k] == nil or type(opts[k]) == "number", "lab.zero.wrap", 2, "opts." .. k .. ": a number", opts[k])
  end
  local stage = opts.stage or 1
  if stage ~= 1 and stage ~= 2 and stage ~= 3 then errors.raise("zero", "stage must be 1, 2 or 3, got %s", tostring(stage)) end
  local self = setmetatable({
    module = model, stage = stage, group = opts.group,
    n = lab.dist.world(opts.group), r = lab.dist.rank(opts.group),
    lr = opts.lr or 1e-3, betas = opts.betas or { 0.9, 0.999 }, eps = opts.eps or 1e-8,
    weight_decay = opts.weight_decay or 0.01, clip = opts.clip, step_count = 0,
    groups = {}, group_of = {},
  }, Engine)
  local named = model:named_parameters()
  lab.no_grad(function()
    for _, np in ipairs(named) do lab.dist.broadcast(np[2], 0, { group = self.group }) end
  end)

  -- the groups: buckets in reverse order (the order gradients arrive), or modules
  local lists = {}
  if stage == 3 then
    local shared = {}
    for _, np in ipairs(named) do
      if np[2].shared then shared[#shared + 1] = np[2] end
    end
    for _, m in ipairs(modules_with_params(model)) do
      local ps = {}
      for _, name in ipairs(m._names) do
        local p = m[name]
        if m._kinds[name] == "param" and p ~= nil and not p.shared then ps[#ps + 1] = p end
      end
      if #ps > 0 then lists[#lists + 1] = { params = ps, module = m } end
    end
    if #shared > 0 then lists[#lists + 1] = { params = shared, shared = true } end
  else
    local limit, current = (opts.bucket_mb or 25) * 1024 * 1024, nil
    for i = #named, 1, -1 do
      local p = named[i][2]
      local bytes = p:numel() * p:element_size()
      if not current or current.bytes + bytes > limit then
        current = { params = {}, bytes = 0 }
        lists[#lists + 1] = current
      end
      current.params[#current.params + 1] = p
      current.bytes = current.bytes + bytes
    end
  end
  for _, l in ipairs(lists) do
    local g = self:_make_group(l.params, l.module)
    if l.shared then self.shared = g end
  end

  for _, g in ipairs(self.groups) do
    for _, p in ipairs(g.params) do
      lab.ddp.reduced_by[p] = "lab.zero.wrap"
      p:register_post_accumulate_grad_hook(function(q) self:_grad_ready(q) end)
    end
  end
  if stage == 3 then self:_wrap_forwards() end
  -- stages 1 and 2 keep whole parameters on every rank: replicas that must agree
  return replicas.register(self, "lab.zero.wrap (stage " .. stage .. ")", Engine._reset,
    { model = stage < 3 and function(w) return w.module end or nil, group = self.group })
end

-- After a step cut short (lab.replicas): no backward in progress, every group's count of
-- gradients and pending gather settled, gathered copies released, partial gradients dropped.
function Engine:_reset()
  self.in_backward, self.reduced = false, false
  for _, g in ipairs(self.groups) do
    local h = g.pending
    g.ready, g.got, g.pending, g.send = 0, {}, nil, nil
    replicas.settle(h)
    if self.stage == 3 then
      g.gathered = true -- what _release expects of a gathered group: it gives the memory back
      self:_release(g)
    end
  end
  self:zero_grad()
end

function Engine:__tostring()
  return replicas.tree(string.format("ZeRO(stage %d, %d rank%s)", self.stage, self.n, self.n == 1 and "" or "s"), self.module)
end

-- One group: a flat buffer holding its parameters (padded to a multiple of N), this rank's
-- shard of it, and the shard's gradient and Adam moments.
function Engine:_make_group(params, module)
  local n, r = self.n, self.r
  local g = { params = params, module = module, offsets = {}, ready = 0, got = {} }
  local numel = 0
  for _, p in ipairs(params) do
    g.offsets[p] = numel + 1
    numel = numel + p:numel()
  end
  g.numel = numel
  g.padded = ((numel + n - 1) // n) * n
  g.shard_len = g.padded // n
  g.lo = r * g.shard_len + 1 -- this rank's first element in the flat buffer
  -- the flat buffers live where the parameters do (model:to(device) before wrapping)
  local dtype, device = params[1].dtype, params[1].device
  for _, p in ipairs(params) do
    if p.device ~= device then
      errors.raise("lab.zero.wrap", "one module's parameters are on %s and on %s; move the model with model:to(device) "
        .. "before wrapping it", device, p.device)
    end
  end
  g.full = lab.mem.tag(lab.zeros(g.padded, { dtype = dtype, device = device }), "param")
  for _, p in ipairs(params) do
    lab._rebind(p, g.full, g.offsets[p])
    self.group_of[p] = g
  end
  if self.stage == 3 then
    g.master = lab.mem.tag(g.full:narrow(1, g.lo, g.shard_len):clone(), "param")
    lab._release_data(g.full)
    g.gathered = false
  else
    g.master = g.full:narrow(1, g.lo, g.shard_len)
  end
  g.dtype, g.device = dtype, device
  g.m = lab.mem.tag(lab.zeros(g.shard_len, { dtype = dtype, device = device }), "optimizer")
  g.v = lab.mem.tag(lab.zeros(g.shard_len, { dtype = dtype, device = device }), "optimizer")
  -- the pieces of parameters inside this rank's shard, each with its weight decay
  g.segments = {}
  local s_lo, s_hi = g.lo, g.lo + g.shard_len - 1
  for _, p in ipairs(params) do
    local a, b = g.offsets[p], g.offsets[p] + p:numel() - 1
    local lo, hi = math.max(a, s_lo), math.min(b, s_hi)
    if lo <= hi then
      g.segments[#g.segments + 1] = { lo = lo - s_lo + 1, len = hi - lo + 1, wd = p:dim() >= 2 and self.weight_decay or 0 }
    end
  end
  self.groups[#self.groups + 1] = g
  return g
end

-- Stage 3 with shared parameters: their group is gathered around the whole forward and
-- again when the first gradient reaches one of the outputs (the start of backward).
function Engine:__call(...)
  local g = self.shared
  if not g then return self.module(...) end
  self:_gather(g)
  local res = table.pack(pcall(self.module, ...))
  self:_release(g)
  if not res[1] then error(res[2], 0) end
  for i = 2, res.n do
    local out = res[i]
    if lab.is_tensor(out) and out.requires_grad then out:register_hook(function() self:_gather(g) end) end
  end
  return table.unpack(res, 2, res.n)
end
function Engine:parameters() return self.module:parameters() end
function Engine:named_parameters() return self.module:named_parameters() end
function Engine:train(mode) self.module:train(mode) return self end
function Engine:eval() self.module:eval() return self end

-- ---- stage 3: gather before use, free after ----

function Engine:_prefetch(g)
  if not g or g.gathered or g.pending then return end
  replicas.touch(self) -- stage 3's step starts with its forward's gathers
  lab._restore_data(g.full)
  g.send = g.master:clone()
  g.pending = lab.dist.all_gather_into_tensor(g.full, g.send, { async = true, group = self.group })
end

function Engine:_gather(g)
  if g.gathered then return end
  if not g.pending then self:_prefetch(g) end
  g.pending:wait()
  g.pending, g.send, g.gathered = nil, nil, true
end

function Engine:_release(g)
  if g.gathered then
    lab._release_data(g.full)
    g.gathered = false
  end
end

-- Before the shards change (a step, a checkpoint load) every gathered copy is dropped: a
-- prefetch in backward can gather a group whose gradient is already reduced (a module
-- registered before one it runs after, as a root's own parameter), and that copy would
-- hold the old values into the next forward.
function Engine:_drop_gathered()
  for _, g in ipairs(self.groups) do
    if g.pending then
      g.pending:wait()
      g.pending, g.send, g.gathered = nil, nil, true
    end
    self:_release(g)
  end
end

function Engine:_wrap_forwards()
  for i, g in ipairs(self.groups) do
    if g ~= self.shared then self:_wrap_forward(i, g) end
  end
end

-- module i's forward gathers its group, prefetches the next, and releases its own after
function Engine:_wrap_forward(i, g)
  local mod, engine = g.module, self
  local forward = mod.forward
  mod.forward = function(m, ...)
    engine:_gather(g)
    engine:_prefetch(engine.groups[i + 1]) -- the next module's, while this one computes
    local res = table.pack(forward(m, ...)) -- every result (a model may return logits and loss)
    for k = 1, res.n do
      local out = res[k]
      if lab.is_tensor(out) and out.requires_grad then
        -- the gradient of an output arrives just before this module's backward runs
        out:register_hook(function()
          engine:_gather(g)
          engine:_prefetch(engine.groups[i - 1])
        end)
      end
    end
    engine:_release(g)
    return table.unpack(res, 1, res.n)
  end
end

-- ---- gradients ----

-- all of a group's gradients are in: reduce-scatter them into the shard (stages 2, 3)
function Engine:_reduce_group(g)
  local flat = lab.mem.tag(lab.zeros(g.padded, { dtype = g.dtype, device = g.device }), "comm")
  lab.no_grad(function()
    for _, p in ipairs(g.params) do
      if p.grad then flat:narrow(1, g.offsets[p], p:numel()):copy_(p.grad:reshape(p:numel())) end
      p.grad = nil -- the full gradient is freed: only the shard stays
    end
    local part = lab.mem.tag(lab.zeros(g.shard_len, { dtype = g.dtype, device = g.device }), "comm")
    lab.dist.reduce_scatter(part, flat, "avg", { group = self.group })
    -- the shard accumulates over backwards until the step (gradient accumulation)
    if not g.grad_shard then g.grad_shard = lab.mem.tag(lab.zeros(g.shard_len, { dtype = g.dtype, device = g.device }), "grad") end
    g.grad_shard:add_(part)
    part:close()
  end)
  flat:close()
  g.ready, g.got = 0, {}
  if self.stage == 3 then self:_release(g) end
end

function Engine:_grad_ready(p)
  if self.stage == 1 then return end
  local g = self.group_of[p]
  if not self.in_backward then
    self.in_backward = true
    replicas.touch(self)
    lab.autograd.queue_callback(function() self:_end_backward() end)
  end
  if not g.got[p] then
    g.got[p] = true
    g.ready = g.ready + 1
  end
  if g.ready == #g.params then self:_reduce_group(g) end
end

-- groups whose parameters did not all get a gradient are reduced with zeros for the
-- missing ones, so every rank runs the same collectives
function Engine:_end_backward()
  self.in_backward = false
  for _, g in ipairs(self.groups) do
    if g.ready > 0 then self:_reduce_group(g) end
  end
end

function Engine:zero_grad()
  for _, g in ipairs(self.groups) do
    if g.grad_shard then g.grad_shard:zero_() end
    for _, p in ipairs(g.params) do p.grad = nil end
  end
end

-- ---- the optimizer step on this rank's shards ----

-- Stage 1 reduce-scatters the accumulated gradients here (stages 2 and 3 did during
-- backward); step() calls it when it was not called since the last step.
function Engine:reduce_gradients()
  if self.stage == 1 and not self.reduced then
    for _, g in ipairs(self.groups) do self:_reduce_group(g) end
  end
  self.reduced = true
end

-- this rank's copy of every parameter's whole value (all-gathered from the shards at
-- stage 3), param -> tensor: for inspection and tests
function Engine:gathered_parameters()
  local out = {}
  for _, g in ipairs(self.groups) do
    local full = g.full
    if self.stage == 3 then
      full = lab.zeros(g.padded, { dtype = g.dtype, device = g.device })
      lab.dist.all_gather_into_tensor(full, g.master:clone(), { group = self.group })
    end
    for _, p in ipairs(g.params) do out[p] = full:narrow(1, g.offsets[p], p:numel()):view(p.shape):clone() end
  end
  return out
end

-- every parameter's reduced (averaged) gradient, all-gathered from the gradient shards:
-- what the next step() will use, before clipping (after reduce_gradients() at stage 1)
function Engine:gathered_gradients()
  local out = {}
  for _, g in ipairs(self.groups) do
    if g.grad_shard then
      local full = lab.zeros(g.padded, { dtype = g.dtype, device = g.device })
      lab.dist.all_gather_into_tensor(full, g.grad_shard:clone(), { group = self.group })
      for _, p in ipairs(g.params) do out[p] = full:narrow(1, g.offsets[p], p:numel()):view(p.shape) end
    end
  end
  return out
end

function Engine:step()
  replicas.touch(self)
  self.step_count = self.step_count + 1
  self:reduce_gradients()
  if self.stage == 3 then self:_drop_gathered() end
  self.reduced = false
  local norm
  if self.clip then -- the global norm: every rank's shard contributes its squares
    local sq = lab.zeros(1, { dtype = "f64", device = self.groups[1] and self.groups[1].device })
    for _, g in ipairs(self.groups) do
      if g.grad_shard then sq:add_((g.grad_shard:to("f64") ^ 2):sum()) end
    end
    lab.dist.all_reduce(sq, { group = self.group })
    norm = math.sqrt(sq[1])
    if norm > self.clip then
      local scale = self.clip / (norm + 1e-6)
      for _, g in ipairs(self.groups) do
        if g.grad_shard then g.grad_shard:mul_(scale) end
      end
    end
  end
  local hp = { lr = self.lr, beta1 = self.betas[1], beta2 = self.betas[2], eps = self.eps, step = self.step_count }
  for _, g in ipairs(self.groups) do
    g.grad_shard = g.grad_shard or lab.zeros(g.shard_len, { dtype = g.dtype, device = g.device })
    for _, s in ipairs(g.segments) do
      hp.weight_decay = s.wd
      lab._optim_c.adamw_step(g.master:narrow(1, s.lo, s.len), g.m:narrow(1, s.lo, s.len),
        g.v:narrow(1, s.lo, s.len), hp, g.grad_shard:narrow(1, s.lo, s.len))
    end
    if self.stage < 3 then -- everyone gets everyone's updated parameters back
      local send = g.master:clone()
      lab.dist.all_gather_into_tensor(g.full, send, { group = self.group })
      send:close()
    end
    if self.stage == 1 then
      g.grad_shard = nil -- stage 1 keeps full gradients during backward, no shard between steps
    else
      g.grad_shard:zero_()
    end
  end
  return norm
end

-- ---- checkpoints: each rank's shards, described so that any layout can load them ----

-- One entry per piece of a parameter inside this rank's shard: the parameter's name and full
-- shape, the piece's elements [from, to) in the parameter's row-major order, and views of
-- the piece in the fp32 parameter shard and in both Adam moments. lab.ckpt saves these views
-- and, on load, copies into them; then load_checkpoint_done rebuilds the full parameters.
function Engine:checkpoint_shards()
  local names = {}
  for _, np in ipairs(self.module:named_parameters()) do names[np[2]] = np[1] end
  local out = {}
  for _, g in ipairs(self.groups) do
    local s_lo, s_hi = g.lo, g.lo + g.shard_len - 1
    for _, p in ipairs(g.params) do
      local a, b = g.offsets[p], g.offsets[p] + p:numel() - 1
      local lo, hi = math.max(a, s_lo), math.min(b, s_hi)
      if lo <= hi then
        local at, n = lo - s_lo + 1, hi - lo + 1
        out[#out + 1] = { name = names[p], shape = p.shape, from = lo - a, to = hi - a + 1,
          param = g.master:narrow(1, at, n), exp_avg = g.m:narrow(1, at, n), exp_avg_sq = g.v:narrow(1, at, n) }
      end
    end
  end
  return out, { stage = self.stage, ranks = self.n, step_count = self.step_count, lr = self.lr }
end

-- after lab.ckpt has filled the shards: the counters, and every rank's full parameters
-- from everyone's shards (stages 1-2; stage 3 gathers before each use)
function Engine:load_checkpoint_done(step_count, lr)
  errors.arg(math.type(step_count) == "integer" and step_count >= 0, "ZeRO:load_checkpoint_done", 1,
    "the optimizer's step count (an integer >= 0)", step_count)
  errors.arg(type(lr) == "number" and lr == lr and lr >= 0, "ZeRO:load_checkpoint_done", 2, "the learning rate (a number >= 0)", lr)
  self.step_count, self.lr = step_count, lr
  if self.stage == 3 then return self:_drop_gathered() end
  lab.no_grad(function()
    for _, g in ipairs(self.groups) do
      local send = g.master:clone()
      lab.dist.all_gather_into_tensor(g.full, send, { group = self.group })
      send:close()
    end
  end)
end

return zero
