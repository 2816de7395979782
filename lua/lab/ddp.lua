-- lab.ddp: distributed data parallelism, as torch.nn.parallel.DistributedDataParallel.
--
-- Every rank holds the whole model and trains on its own slice of the batch. To stay
-- replicas, the ranks must apply the same update, so gradients are averaged with all_reduce
-- before the optimizer step. Doing that per parameter would pay the collective's latency
-- hundreds of times; doing it once at the end would leave the network idle during the whole
-- backward. DDP does neither:
--   * parameters are grouped into buckets of about bucket_mb, in reverse order of
--     registration (the order backward produces their gradients);
--   * a hook on each parameter copies its gradient into its bucket as soon as autograd has
--     accumulated it; when a bucket is full its all_reduce starts asynchronously, while
--     backward goes on computing the gradients of earlier layers (overlap);
--   * when backward ends, the remaining buckets are reduced, every bucket is waited for, and
--     each parameter's .grad becomes its slice of the averaged bucket.
-- no_sync() skips all of this for gradient accumulation: gradients add up locally, and the
-- next synchronised backward reduces the accumulated sum.
local errors = require("lab.errors")
local replicas = require("lab.replicas")
local ddp = {}

local DDP = {}
DDP.__index = DDP

local function numel_of(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- opts: bucket_mb (25), overlap (true), find_unused_parameters (false), group (world),
-- broadcast_parameters (true)
-- which wrapper reduces a parameter's gradient (weak keys: forgotten with the parameter);
-- lets lab.amp refuse to replace parameters a wrapper already hooks
ddp.reduced_by = setmetatable({}, { __mode = "k" })

-- true for what ddp.wrap returns (lab.train.run takes one as its model)
function ddp.is_wrapper(x) return type(x) == "table" and getmetatable(x) == DDP end

function ddp.wrap(model, opts)
  lab.nn.check_module(model, "ddp.wrap")
  errors.opts("lab.ddp.wrap", 2, opts)
  opts = opts or {}
  errors.group("lab.ddp.wrap", 2, opts.group, "opts.group: a process group")
  errors.arg(opts.bucket_mb == nil or (type(opts.bucket_mb) == "number" and opts.bucket_mb > 0), "lab.ddp.wrap", 2,
    "opts.bucket_mb: a positive number", opts.bucket_mb)
  local self = setmetatable({
    module = model,
    group = opts.group,
    overlap = opts.overlap ~= false,
    find_unused = opts.find_unused_parameters or false,
    sync = true,
    buckets = {},
    slot = {}, -- param -> {bucket, offset, numel}
  }, DDP)
  local named = model:named_parameters()
  self.names = {}
  for _, np in ipairs(named) do self.names[np[2]] = np[1] end

  -- 1. one model on every rank: rank 0's parameters are broadcast to the others
  if opts.broadcast_parameters ~= false then
    lab.no_grad(function()
      for _, np in ipairs(named) do lab.dist.broadcast(np[2], 0, { group = self.group }) end
    end)
  end

  -- frozen parameters (requires_grad false: LoRA's base, a reference model) get no
  -- gradient to reduce, so no bucket and no hook, as in PyTorch's DDP
  local all = named
  named = {}
  for _, np in ipairs(all) do
    if np[2].requires_grad then named[#named + 1] = np end
  end

  -- 2. buckets in reverse registration order, each at most bucket_mb (a larger parameter
  -- gets a bucket of its own)
  local limit = (opts.bucket_mb or 25) * 1024 * 1024
  local current
  for i = #named, 1, -1 do
    local p = named[i][2]
    local bytes = p:numel() * p:element_size()
    if not current or current.bytes + bytes > limit or current.dtype ~= p.dtype or current.device ~= p.device then
      current = { params = {}, bytes = 0, numel = 0, dtype = p.dtype, device = p.device }
      self.buckets[#self.buckets + 1] = current
    end
    current.params[#current.params + 1] = p
    self.slot[p] = { bucket = current, offset = current.numel + 1, numel = p:numel(), shape = p.shape }
    current.numel = current.numel + p:numel()
    current.bytes = current.bytes + bytes
  end
  -- after each step the parameters' .grad are views into these buffers, so they are the
  -- gradient memory (as in PyTorch's gradient_as_bucket_view)
  for _, b in ipairs(self.buckets) do
    b.buffer = lab.mem.tag(lab.zeros(b.numel, { dtype = b.dtype, device = b.device }), "grad")
  end

  -- 3. a hook per parameter, run after autograd accumulated its gradient
  for _, np in ipairs(named) do
    ddp.reduced_by[np[2]] = "lab.ddp.wrap"
    np[2]:register_post_accumulate_grad_hook(function(p) self:_grad_ready(p) end)
  end
  return replicas.register(self, "lab.ddp.wrap", DDP._reset, { model = function(w) return w.module end, group = self.group })
end

-- After a step cut short (lab.replicas, from the REPL's recovery): no step in progress, the
-- pending bucket work settled, the partial gradients dropped; the next backward starts afresh.
function DDP:_reset()
  self.in_step = false
  for _, b in ipairs(self.buckets) do
    local h = b.handle
    b.ready, b.handle, b.got = 0, nil, {}
    replicas.settle(h)
  end
  self.module:zero_grad()
end

function DDP:__tostring()
  return replicas.tree(string.format("DDP(%d bucket%s%s)", #self.buckets, #self.buckets == 1 and "" or "s",
    self.find_unused and ", find_unused_parameters" or ""), self.module)
end

function DDP:__call(...) return self.module(...) end
function DDP:forward(...) return self.module(...) end
function DDP:parameters() return self.module:parameters() end
function DDP:named_parameters() return self.module:named_parameters() end
function DDP:state_dict() return self.module:state_dict() end
function DDP:train(mode) self.module:train(mode) return self end
function DDP:eval() self.module:eval() return self end
function DDP:zero_grad() self.module:zero_grad() end

-- Runs fn (or returns a guard for `local g <close> = model:no_sync()`) with gradient
-- synchronisation off: gradients accumulate locally.
function DDP:no_sync(fn)
  local previous = self.sync
  self.sync = false
  if fn then
    local ok, err = pcall(fn)
    self.sync = previous
    if not ok then error(err, 0) end
    return
  end
  return setmetatable({}, { __close = function() self.sync = previous end })
end

function DDP:_start_step()
  self.in_step = true
  replicas.touch(self)
  for _, b in ipairs(self.buckets) do
    b.ready, b.handle, b.got = 0, nil, {}
  end
  lab.autograd.queue_callback(function() self:_finish() end)
end

function DDP:_launch(b)
  b.handle = lab.dist.all_reduce(b.buffer, { op = "avg", async = true, group = self.group })
end

function DDP:_grad_ready(p)
  if not self.sync then return end
  if not self.in_step then self:_start_step() end
  local s = self.slot[p]
  local b = s.bucket
  lab.no_grad(function() b.buffer:narrow(1, s.offset, s.numel):copy_(p.grad:reshape(s.numel)) end)
  if not b.got[p] then
    b.got[p] = true
    b.ready = b.ready + 1
  end
  if self.overlap and b.ready == #b.params then self:_launch(b) end
  -- MPI progresses a non-blocking collective only inside MPI calls: poke the ones in flight
  for _, other in ipairs(self.buckets) do
    if other.handle then other.handle:test() end
  end
end

-- End of backward: reduce what is left, wait for everything, hand out the averages.
function DDP:_finish()
  self.in_step = false
  local missing = {}
  for _, b in ipairs(self.buckets) do
    if b.ready < #b.params then
      -- parameters that got no gradient on this rank: zeros, so every rank still runs the
      -- same collectives (an error raised now would leave the others waiting in them)
      for _, p in ipairs(b.params) do
        if not b.got[p] then
          local s = self.slot[p]
          lab.no_grad(function() b.buffer:narrow(1, s.offset, s.numel):zero_() end)
          missing[#missing + 1] = self.names[p]
        end
      end
    end
    if not b.handle then self:_launch(b) end
  end
  for _, b in ipairs(self.buckets) do b.handle:wait() end
  -- every rank must raise (or not) together: agree on it over the control channel
  local unused = lab.dist._agree_max(#missing, { group = self.group })
  if unused > 0 and not self.find_unused then
    error(string.format("rank %d: ddp: parameters got no gradient in this backward (%s); pass "
      .. "{find_unused_parameters=true} to lab.ddp.wrap if that is intended", lab.dist.rank(),
      #missing > 0 and table.concat(missing, ", ") or "on another rank"), 0)
  end
  for p, s in pairs(self.slot) do
    if s.bucket.got[p] or self.find_unused then
      p.grad = s.bucket.buffer:narrow(1, s.offset, s.numel):view(s.shape)
    end
  end
end

return ddp
