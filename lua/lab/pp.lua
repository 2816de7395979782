-- lab.pp: pipeline parallelism. The model's layers are cut into consecutive stages, one per
-- rank of a pipeline group; a batch is cut into micro-batches that flow through the stages
-- (activations forward with send/recv, their gradients backward the same way). With one
-- micro-batch in flight a stage would idle (p-1)/p of the time; with m micro-batches the
-- idle share (the bubble) is (p-1)/(m+p-1).
--   GPipe: all forwards, then all backwards (activations of m micro-batches held).
--   1F1B:  after p-s-1 warm-up forwards, stage s alternates one forward and one backward,
--          so at most p micro-batches' activations are held (Narayanan et al., 2021).
-- Both give the same gradients; sends are asynchronous (isend) so no order of the stages
-- can deadlock on them.
local pp = {}

-- Splits a list of layers into n consecutive stages, as evenly as the count allows.
function pp.partition(layers, n)
  local stages, at = {}, 1
  for s = 1, n do
    local count = #layers // n + (s <= #layers % n and 1 or 0)
    local part = {}
    for i = at, at + count - 1 do part[#part + 1] = layers[i] end
    at = at + count
    stages[s] = lab.nn.Sequential(part)
    stages[s].first_layer = at - count -- lab.ckpt names layer i of this stage by its place in the model
  end
  return stages
end

local Pipeline = {}
Pipeline.__index = Pipeline

-- pp.Pipeline(stage_module, {group=, micro_batches=4, schedule='1f1b'|'gpipe',
--   loss=function(output, target) -> scalar, activation_shape=function(mb, stage) -> shape,
--   dtype=}) on every rank of the group: stage r runs stage_module; activation_shape gives
-- the shape of a stage's input for a micro-batch of mb (what it receives).
function pp.Pipeline(stage, opts)
  opts = opts or {}
  local g = opts.group or lab.dist.world_group()
  local self = setmetatable({ stage = stage, group = g, p = lab.dist.world(g), s = lab.dist.rank(g),
    m = opts.micro_batches or 4, schedule = opts.schedule or "1f1b", loss = opts.loss,
    activation_shape = opts.activation_shape }, Pipeline)
  -- activations travel in the stage's parameter type unless told otherwise
  local params = stage:parameters()
  self.dtype = opts.dtype or (params[1] and params[1].dtype) or "f32"
  assert(self.loss, "pp.Pipeline needs a loss function")
  assert(self.activation_shape, "pp.Pipeline needs activation_shape(micro_batch_size, stage)")
  return self
end

function Pipeline:parameters() return self.stage:parameters() end

-- One training step's forward and backward over the whole batch; the parameters of this
-- stage end with the gradient of the mean loss. input and target are the whole batch
-- (needed on the first and the last stage respectively). Returns the mean loss on every
-- rank of the group. Afterwards self.max_in_flight says how many micro-batches' activations
-- this stage held at once (m for GPipe, at most p - s for 1F1B).
function Pipeline:train_step(input, target)
  local p, s, m, g = self.p, self.s, self.m, self.group
  local first, last = s == 0, s == p - 1
  local B = (input or target).shape[1]
  assert(B % m == 0, string.format("pp: batch %d does not split into %d micro-batches", B, m))
  local mb = B // m
  local saved = {}   -- per micro-batch: {input leaf, output}
  local pending = {} -- isend handles, waited at the end of the step
  local loss_sum = 0
  local opts = { group = g }
  local in_flight = 0 -- micro-batches whose activations this stage holds
  self.max_in_flight = 0

  local function forward(k)
    local x
    if first then
      x = input:narrow(1, (k - 1) * mb + 1, mb)
    else
      x = lab.zeros(self.activation_shape(mb, s), { dtype = self.dtype })
      lab.dist.recv(x, s - 1, { group = g, tag = k })
      x:requires_grad_()
    end
    local y = self.stage(x)
    if last then
      local l = self.loss(y, target:narrow(1, (k - 1) * mb + 1, mb)) / m
      loss_sum = loss_sum + l:item()
      y = l
    else
      pending[#pending + 1] = lab.dist.isend(y:detach():contiguous(), s + 1, { group = g, tag = k })
    end
    saved[k] = { x = x, y = y }
    in_flight = in_flight + 1
    self.max_in_flight = math.max(self.max_in_flight, in_flight)
  end

  local function backward(k)
    local sv = saved[k]
    if last then
      sv.y:backward()
    else
      local gy = lab.zeros(sv.y.shape, { dtype = sv.y.dtype })
      lab.dist.recv(gy, s + 1, { group = g, tag = 1000 + k })
      sv.y:backward(gy)
    end
    if not first then
      pending[#pending + 1] = lab.dist.isend(sv.x.grad:contiguous(), s - 1, { group = g, tag = 1000 + k })
    end
    saved[k] = nil -- the activations of this micro-batch are done
    in_flight = in_flight - 1
  end

  if self.schedule == "gpipe" then
    for k = 1, m do forward(k) end
    for k = 1, m do backward(k) end
  else -- 1F1B
    local warmup = math.min(p - s - 1, m)
    for k = 1, warmup do forward(k) end
    local next_f, next_b = warmup + 1, 1
    while next_f <= m do
      forward(next_f)
      next_f = next_f + 1
      backward(next_b)
      next_b = next_b + 1
    end
    while next_b <= m do
      backward(next_b)
      next_b = next_b + 1
    end
  end
  for _, h in ipairs(pending) do h:wait() end
  local l = lab.tensor({ loss_sum }, { dtype = "f64" })
  lab.dist.broadcast(l, p - 1, opts)
  return l[1]
end

return pp
