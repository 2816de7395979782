-- lab.pp: pipeline parallelism. The model's layers are cut into consecutive stages, one per
-- rank of a pipeline group; a batch is cut into micro-batches that flow through the stages
-- (activations forward with send/recv, their gradients backward the same way). With one
-- micro-batch in flight a stage would idle (p-1)/p of the time; with m micro-batches the
-- idle share (the bubble) is (p-1)/(m+p-1).
--   GPipe: all forwards, then all backwards (activations of m micro-batches held).
--   1F1B:  after p-s-1 warm-up forwards, stage s alternates one forward and one backward,
--          so at most p micro-batches' activations are held (Narayanan et al., 2021).
--   interleaved 1F1B (virtual stages, Megatron-LM): each rank holds v model chunks, chunk c
--          of rank s being global stage c*p + s, so a micro-batch passes every rank v times
--          in smaller steps; the bubble shrinks to (p-1)/(v*m + p-1) of the step, at the cost
--          of v times the point-to-point messages and (p-s-1)*2 + (v-1)*p warm-up forwards.
-- Stages may be uneven (pp.partition's sizes): Llama 3 gives the first and the last stage
-- fewer layers, since they also hold the embedding and the output head.
-- Both give the same gradients; sends are asynchronous (isend) so no order of the stages
-- can deadlock on them.
local errors = require("lab.errors")
local replicas = require("lab.replicas")
local pp = {}

-- Splits a list of layers into n consecutive stages, as evenly as the count allows, or
-- with opts.sizes = {layers of stage 1, ..., of stage n} (uneven, summing to #layers).
function pp.partition(layers, n, opts)
  errors.opts("lab.pp.partition", 3, opts)
  if type(layers) ~= "table" or lab.is_tensor(layers) then
    error(string.format("rank %d: pp.partition: layers must be a list of modules, got %s", lab.dist.rank(),
      lab.is_tensor(layers) and "a tensor" or type(layers)), 2)
  end
  for i, l in ipairs(layers) do
    if not lab.nn.is_module(l) then errors.raise("lab.pp.partition", "layer %d is a %s, not a lab.nn module", i, type(l)) end
  end
  if math.type(n) ~= "integer" or n < 1 or n > math.max(#layers, 1) then
    error(string.format("rank %d: pp.partition: n must be an integer between 1 and the number of layers (%d), got %s",
      lab.dist.rank(), #layers, tostring(n)), 2)
  end
  local sizes = opts and opts.sizes
  if sizes then
    local total = 0
    for _, c in ipairs(sizes) do total = total + c end
    if #sizes ~= n or total ~= #layers then
      error(string.format("rank %d: pp.partition: sizes {%s} must give %d stages summing to %d layers", lab.dist.rank(),
        table.concat(sizes, ","), n, #layers), 2)
    end
  end
  local stages, at = {}, 1
  for s = 1, n do
    local count = sizes and sizes[s] or (#layers // n + (s <= #layers % n and 1 or 0))
    local part = {}
    for i = at, at + count - 1 do part[#part + 1] = layers[i] end
    at = at + count
    stages[s] = lab.nn.Sequential(part)
    stages[s].first_layer = at - count -- lab.ckpt names layer i of this stage by its place in the model
  end
  return stages
end

-- The most micro-batch activations (per model chunk) stage s holds at once under a
-- schedule: m for GPipe, min(m, p - s) for 1F1B, min(v m, (p-s-1)*2 + (v-1)*p + 1)
-- interleaved (its warm-up forwards plus the one before the first backward).
function pp.max_in_flight(schedule, p, s, m, v)
  errors.arg(schedule == "gpipe" or schedule == "1f1b" or schedule == "interleaved", "lab.pp.max_in_flight", 1,
    "'gpipe', '1f1b' or 'interleaved'", schedule)
  errors.posint("lab.pp.max_in_flight", 2, p, "stages")
  errors.arg(math.type(s) == "integer" and s >= 0 and s < p, "lab.pp.max_in_flight", 3, "a stage in 0..p-1", s)
  errors.posint("lab.pp.max_in_flight", 4, m, "micro-batches")
  errors.arg(v == nil or (math.type(v) == "integer" and v >= 1), "lab.pp.max_in_flight", 5, "a positive integer (chunks) or nil", v)
  if schedule == "interleaved" then v = v or 1 end
  if schedule == "gpipe" then return m * (v or 1) end
  if schedule == "1f1b" then return math.min(m, p - s) end
  return math.min(m * v, (p - s - 1) * 2 + (v - 1) * p + 1)
end

local Pipeline = {}
Pipeline.__index = Pipeline

-- pp.Pipeline(stage_module, {group=, micro_batches=4, schedule='1f1b'|'gpipe'|'interleaved',
--   loss=function(output, target) -> scalar, activation_shape=function(mb, stage) -> shape,
--   dtype=}) on every rank of the group: stage r runs stage_module; activation_shape gives
-- the shape of a stage's input for a micro-batch of mb (what it receives). For
-- 'interleaved', stage_module is a list of this rank's v chunks {chunk 0, chunk 1, ...}
-- (chunk c is global stage c*p + s, which activation_shape receives).
function pp.Pipeline(stage, opts)
  errors.arg(lab.nn.is_module(stage) or (type(stage) == "table" and lab.nn.is_module(stage[1])), "lab.pp.Pipeline", 1,
    "a stage module (or the list of this rank's chunks)", stage)
  errors.opts("lab.pp.Pipeline", 2, opts)
  opts = opts or {}
  errors.group("lab.pp.Pipeline", 2, opts.group, "opts.group: a process group")
  local g = opts.group or lab.dist.world_group()
  local schedule = opts.schedule or "1f1b"
  if schedule ~= "gpipe" and schedule ~= "1f1b" and schedule ~= "interleaved" then
    error(string.format("rank %d: pp.Pipeline: schedule must be 'gpipe', '1f1b' or 'interleaved', got %s", lab.dist.rank(), tostring(schedule)), 0)
  end
  local chunks = schedule == "interleaved" and stage or { stage }
  if schedule == "interleaved" and (type(stage) ~= "table" or lab.nn.is_module(stage) or #stage < 1) then
    error(string.format("rank %d: pp.Pipeline: 'interleaved' takes the list of this rank's model chunks", lab.dist.rank()), 0)
  end
  local self = setmetatable({ stage = stage, chunks = chunks, v = #chunks, group = g, p = lab.dist.world(g),
    s = lab.dist.rank(g), m = opts.micro_batches or 4, schedule = schedule, loss = opts.loss,
    activation_shape = opts.activation_shape }, Pipeline)
  if schedule == "interleaved" and self.m % self.p ~= 0 then
    error(string.format("rank %d: pp.Pipeline: interleaved needs micro_batches (%d) to be a multiple of the %d stages",
      lab.dist.rank(), self.m, self.p), 2)
  end
  -- activations travel in the stage's parameter type unless told otherwise
  local params = self:parameters()
  self.dtype = opts.dtype or (params[1] and params[1].dtype) or "f32"
  if not self.loss then errors.raise("pp.Pipeline", "needs a loss function (opts.loss)") end
  if not self.activation_shape then errors.raise("pp.Pipeline", "needs activation_shape(micro_batch_size, stage)") end
  return replicas.register(self, "lab.pp.Pipeline", Pipeline._reset)
end

-- After a step cut short (lab.replicas): its sends settled (recovery received or dropped what
-- no stage took), its activations let go
function Pipeline:_reset()
  local pending = self._pending or {}
  self._pending = nil
  for _, h in ipairs(pending) do replicas.settle(h) end
end

function Pipeline:parameters()
  local out = {}
  for _, c in ipairs(self.chunks) do
    for _, p in ipairs(c:parameters()) do out[#out + 1] = p end
  end
  return out
end

-- The order of this rank's work: a list of {"F" or "B", micro-batch, chunk} (1-based).
function Pipeline:order()
  local p, s, m, v = self.p, self.s, self.m, self.v
  local out = {}
  local function add(kind, k, c) out[#out + 1] = { kind, k, c } end
  if self.schedule == "gpipe" then
    for k = 1, m do add("F", k, 1) end
    for k = 1, m do add("B", k, 1) end
  elseif self.schedule == "1f1b" then
    local warmup = math.min(p - s - 1, m)
    for k = 1, warmup do add("F", k, 1) end
    for k = warmup + 1, m do add("F", k, 1); add("B", k - warmup, 1) end
    for k = m - warmup + 1, m do add("B", k, 1) end
  else
    -- Megatron's interleaved order: forwards go through the chunks p micro-batches at a
    -- time; backwards the same with the chunks reversed
    local total = m * v
    local function unit(i, backward) -- 0-based unit -> micro-batch, chunk
      local c = (i // p) % v
      if backward then c = v - 1 - c end
      return (i // (p * v)) * p + i % p + 1, c + 1
    end
    local warmup = math.min((p - s - 1) * 2 + (v - 1) * p, total)
    for i = 0, warmup - 1 do add("F", unit(i)) end
    for i = warmup, total - 1 do
      add("F", unit(i))
      add("B", unit(i - warmup, true))
    end
    for i = total - warmup, total - 1 do add("B", unit(i, true)) end
  end
  return out
end

-- One training step's forward and backward over the whole batch; the parameters of this
-- stage end with the gradient of the mean loss. input and target are the whole batch
-- (needed on the first and the last stage respectively). Returns the mean loss on every
-- rank of the group (with MoE layers, their auxiliary losses included, as lab.nn.GPT's).
-- Afterwards self.max_in_flight says how many micro-batches' activations (per chunk) this
-- stage held at once: pp.max_in_flight gives the schedule's figure.
function Pipeline:train_step(input, target)
  local p, s, m, g, v = self.p, self.s, self.m, self.group, self.v
  local last_stage = v * p - 1
  local B = (input or target).shape[1]
  if B % m ~= 0 then errors.raise("pp", "batch %d does not split into %d micro-batches", B, m) end
  local mb = B // m
  local saved = {}   -- per micro-batch and chunk: {input leaf, output}
  local pending = {} -- isend handles, waited at the end of the step
  self._pending = pending -- for _reset, when the step is cut short
  replicas.touch(self)
  local loss_sum = 0
  local in_flight = 0 -- micro-batch chunks whose activations this stage holds
  self.max_in_flight = 0
  -- received activations live where this stage's parameters do (model:to(device) before
  -- the pipeline was made, or after), else where the input is
  local params = self:parameters()
  local device = params[1] and params[1].device or (input or target).device
  local nxt, prv = (s + 1) % p, (s - 1 + p) % p
  -- a message into global stage gs for micro-batch k: even tags forward, odd backward
  local function tag(gs, k, backward) return 2 * (gs * m + k - 1) + (backward and 1 or 0) end
  -- with one rank, chunks hand activations to each other through a local mailbox
  local mailbox = {}
  local function send(t, peer, tg)
    if p == 1 then mailbox[tg] = t return end
    pending[#pending + 1] = lab.dist.isend(t, peer, { group = g, tag = tg })
  end
  local function recv(into, peer, tg)
    if p == 1 then into:copy_(mailbox[tg]); mailbox[tg] = nil return end
    lab.dist.recv(into, peer, { group = g, tag = tg })
  end

  local function forward(k, c)
    local gs = (c - 1) * p + s
    local x
    if gs == 0 then
      x = input:narrow(1, (k - 1) * mb + 1, mb)
    else
      x = lab.zeros(self.activation_shape(mb, gs), { dtype = self.dtype, device = device })
      recv(x, prv, tag(gs, k))
      x:requires_grad_()
    end
    local y = self.chunks[c](x)
    -- the auxiliary losses of this chunk's MoE layers for this micro-batch (router balance
    -- and z-loss, coef-weighted), added to this stage's loss as lab.nn.GPT adds them to its own
    local aux = lab.moe.aux_total(self.chunks[c])
    if aux then
      aux = aux / m
      loss_sum = loss_sum + aux:item()
    end
    if gs == last_stage then
      local l = self.loss(y, target:narrow(1, (k - 1) * mb + 1, mb)) / m
      loss_sum = loss_sum + l:item()
      y = aux and l + aux or l
    else
      send(y:detach():contiguous(), nxt, tag(gs + 1, k))
    end
    saved[c * (m + 1) + k] = { x = x, y = y, aux = gs ~= last_stage and aux or nil }
    in_flight = in_flight + 1
    self.max_in_flight = math.max(self.max_in_flight, in_flight)
  end

  local function backward(k, c)
    local gs = (c - 1) * p + s
    local sv = saved[c * (m + 1) + k]
    if gs == last_stage then
      sv.y:backward()
    else
      local gy = lab.zeros(sv.y.shape, { dtype = sv.y.dtype, device = sv.y.device })
      recv(gy, nxt, tag(gs, k, true))
      if sv.aux then ((sv.y * gy):sum() + sv.aux):backward() else sv.y:backward(gy) end
    end
    if gs > 0 then
      send(sv.x.grad:contiguous(), prv, tag(gs - 1, k, true))
    end
    saved[c * (m + 1) + k] = nil -- the activations of this micro-batch chunk are done
    in_flight = in_flight - 1
  end

  for _, u in ipairs(self:order()) do
    if u[1] == "F" then forward(u[2], u[3]) else backward(u[2], u[3]) end
  end
  for _, h in ipairs(pending) do h:wait() end
  self._pending = nil
  -- the last stage's loss plus every stage's aux losses (zero where there are none)
  local l = lab.tensor({ loss_sum }, { dtype = "f64" })
  if p > 1 then lab.dist.all_reduce(l, { group = g }) end
  return l[1]
end

-- ---- a GPT as pipeline pieces ----
-- The pieces of a lab.nn.GPT or lab.tp.GPT in order: the embeddings, each block, the final
-- LayerNorm with the head; pp.partition cuts them into stages (evenly, or with sizes). The
-- pieces hold the model's own modules, so its named parameters stay the reference's.
local nn = lab.nn
local Embed = nn.class("GPTEmbed")
function Embed:init(model) self.model = model end
function Embed:forward(ids)
  local m = self.model
  return m.wte(ids) + m.wpe(lab.arange(ids.shape[2], { device = ids.device }))
end
local Head = nn.class("GPTHead")
function Head:init(model) self.model = model end
function Head:forward(x) return self.model.head(self.model.ln_f(x)) end

function pp.gpt_pieces(model)
  errors.module("lab.pp.gpt_pieces", 1, model)
  if not model.head then
    error(string.format("rank %d: pp.gpt_pieces: the GPT needs cfg.tied = false (a tied head would share the first stage's embedding)", lab.dist.rank()), 0)
  end
  local pieces = { Embed(model) }
  pieces[1]:add("wte", model.wte)
  pieces[1]:add("wpe", model.wpe)
  for _, b in model.blocks:iter() do pieces[#pieces + 1] = b end
  local head = Head(model)
  head:add("ln_f", model.ln_f)
  head:add("head", model.head)
  pieces[#pieces + 1] = head
  return pieces
end

return pp
