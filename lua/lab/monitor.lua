-- lab.monitor: what a training run watches each step, and the tools that name the layer of a
-- loss spike (data, numeric, communication, hardware) from what they measure alone.
--
--   local mon = lab.monitor.new(ddp_model, {optimizer = opt, jsonl = "run/monitor.jsonl"})
--   for k = 1, steps do
--     mon:begin(k)
--     local _, loss = ddp_model(x, y); loss:backward()
--     local rec = mon:check({loss = loss, recompute = function(r) return <rank r's loss of step k> end})
--     if rec.verdict then ... end      -- {layer=, ranks=, module=, why=}
--     opt:step(); mon:finish()
--   end
--
-- Each step: the loss on every rank; the gradient norm per module; the largest |activation|
-- and the RMS of every module's output (forward hooks); the update-to-weight ratio; the
-- compute time per rank (wall time less time inside collectives, so the ranks that wait for a
-- slow one do not look slow) with the slowest named when it leaves the run's own spread; a
-- checksum of every DDP bucket after its all-reduce, compared across the group; and
-- check_replicas, a checksum of every parameter (and optimizer state) across the group.
-- When the loss or the gradient norm jumps, the step is recomputed (rerun): on the same rank
-- and on the others, as Megatron-LM's rerun state machine does. A different result on the
-- same rank, or one rank against the majority, is hardware; the same everywhere is the data
-- or the numbers. Naming one rank by majority needs 3 ranks; at 2 both are named.
-- Records: mon.records[k] (a table per step) and one JSON line per step (rank 0 writes).
local errors = require("lab.errors")
local sorted_keys = require("lab.sorted_keys")
local replicas = require("lab.monitor_replicas")
local monitor = { check_replicas = replicas.check_replicas, compare = replicas.compare }

local Monitor = {}
Monitor.__index = Monitor

local function median(xs)
  if #xs == 0 then return nil end
  local s = { table.unpack(xs) }
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local function deep_copy(v)
  if type(v) ~= "table" then return v end
  local c = {}
  for key, x in pairs(v) do c[key] = deep_copy(x) end
  return c
end

local FLOAT = { f32 = true, f64 = true, bf16 = true, f16 = true }

local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end

-- opts: group, optimizer (its state joins the replica check), amp (a lab.amp.MixedPrecision:
-- its fp32 masters and optimizer join it), jsonl (a path), depth (module
-- depth of the gradient-norm and activation statistics, 3), activations (true),
-- baseline (what another monitor's :baseline() returned, for a run resumed from a checkpoint),
-- replicas_every (1: check every step), warmup (10 steps before alarms), loss_jump (1.25),
-- grad_jump (4), act_jump (16), straggler (3: times the median compute time), straggler_min
-- (0.1 s: a straggler is at least that much slower), straggler_steps (2 in a row)
function monitor.new(model, opts)
  errors.arg(type(model) == "table", "lab.monitor.new", 1, "a lab.nn module or a DDP wrapper", model)
  errors.opts("lab.monitor.new", 2, opts)
  opts = opts or {}
  local root = model.module or model
  lab.nn.check_module(root, "lab.monitor.new")
  local self = setmetatable({
    model = model, root = root, ddp = model.buckets and model or nil, group = opts.group or model.group,
    optimizer = opts.optimizer or (opts.amp and opts.amp.optimizer), amp = opts.amp, depth = opts.depth or 3,
    replicas_every = opts.replicas_every or 1,
    warmup = opts.warmup or 10, loss_jump = opts.loss_jump or 1.25, grad_jump = opts.grad_jump or 4,
    act_jump = opts.act_jump or 16, straggler_x = opts.straggler or 3,
    straggler_min = opts.straggler_min or 0.1, straggler_steps = opts.straggler_steps or 2, streak = 0,
    records = {}, hist = { loss = {}, grad = {}, act = {}, time = {}, time_p90 = 0 }, hooks = {}, act = {},
  }, Monitor)
  self.world = lab.dist.world(self.group)
  if opts.baseline then -- a history saved by :baseline() (a run resumed from a checkpoint)
    self.hist = deep_copy(opts.baseline)
    -- its per-rank losses are kept only for a group of the same size
    if #self.hist.loss ~= self.world then self.hist.loss = {} end
  end
  self.named = root:named_parameters()
  -- which module a parameter belongs to, cut at `depth` ("blocks.1.attn")
  self.module_of = {}
  for _, np in ipairs(self.named) do
    local parts = {}
    for part in np[1]:gmatch("[^.]+") do parts[#parts + 1] = part end
    self.module_of[np[2]] = table.concat(parts, ".", 1, math.min(self.depth, #parts - 1))
  end
  if opts.activations ~= false then self:_hook_activations() end
  if self.ddp then self:_watch_buckets() end
  if opts.jsonl and lab.dist.rank() == 0 then
    self.jsonl = io.open(opts.jsonl, "w")
    if not self.jsonl then errors.raise("lab.monitor.new", "cannot write %s", opts.jsonl) end
  end
  return self
end

-- forward hooks on every module down to `depth` that has a forward of its own: the largest
-- |x| and the RMS of its (first) output, outside the graph
function Monitor:_hook_activations()
  local function walk(m, prefix, d)
    for _, n in ipairs(m._names) do
      if m._kinds[n] == "module" then
        local child, name = m[n], prefix == "" and n or prefix .. "." .. n
        local cls = getmetatable(child)
        if cls.forward ~= lab.nn.Module.forward and cls ~= lab.nn.Dropout then
          self.hooks[#self.hooks + 1] = child:register_forward_hook(function(_, _, out)
            -- only the step's own forward counts (not an evaluation between steps, not a rerun)
            if not self.collecting or not lab.is_tensor(out) or not FLOAT[out.dtype] then return end
            lab.no_grad(function()
              -- one pass (lab._summary): the largest |x|, the sum of squares, NaN and Inf
              local mx, ss, nan, inf = lab._summary(out)
              local s = self.act[name]
              if not s then -- the order forwards finish in: the innermost, earliest first
                self.order_n = self.order_n + 1
                s = { max = 0, rms = 0, nonfinite = 0, order = self.order_n }
                self.act[name] = s
              end
              s.nonfinite = s.nonfinite + nan + inf
              if nan + inf > 0 then return end
              s.max = math.max(s.max, mx)
              s.rms = math.max(s.rms, math.sqrt(ss / math.max(1, out:numel())))
            end)
          end)
        end
        if d < self.depth then walk(child, name, d + 1) end
      end
    end
  end
  walk(self.root, "", 1)
end

-- each DDP bucket's checksum just before its all-reduce (the rerun compares a recomputed
-- local gradient with it); wraps this wrapper's launch, as lab.fault does
function Monitor:_watch_buckets()
  local ddp, mon = self.ddp, self
  local base = getmetatable(ddp).__index._launch
  local wrapped = rawget(ddp, "_launch") or base
  rawset(ddp, "_launch", function(w, b)
    mon.pre_sums = mon.pre_sums or {}
    for i, x in ipairs(w.buckets) do
      if x == b then mon.pre_sums[i] = b.buffer:checksum() end
    end
    return wrapped(w, b)
  end)
end

-- the baselines learnt so far (losses, gradient norms, activations, step times), to give a
-- run resumed from a checkpoint taken now: monitor.new(model, {baseline = saved})
function Monitor:baseline() return deep_copy(self.hist) end

function Monitor:remove()
  for _, h in ipairs(self.hooks) do h.remove() end
  self.hooks = {}
  if self.ddp then rawset(self.ddp, "_launch", nil) end
  if self.jsonl then self.jsonl:close() end
  self.jsonl = nil
end

function Monitor:begin(k)
  errors.arg(math.type(k) == "integer", "Monitor:begin", 1, "the step number", k)
  self.k, self.act, self.pre_sums, self.order_n, self.collecting = k, {}, {}, 0, true
  self.t0, self.c0 = lab.clock(), lab.dist.comm_time()
end

-- every rank's value of x, in group order (one all_reduce of a vector)
function Monitor:_gather(xs)
  local n = #xs
  local t = lab.zeros(self.world * n, { dtype = "f64" })
  local me = lab.dist.rank(self.group)
  for i, x in ipairs(xs) do t[me * n + i] = x end
  lab.dist.all_reduce(t, { group = self.group })
  local v = t:tolist()
  local out = {}
  for r = 1, self.world do
    out[r] = {}
    for i = 1, n do out[r][i] = v[(r - 1) * n + i] end
  end
  return out
end

-- the global ranks of the group, in group order
function Monitor:_ranks()
  if not self.ranks then
    local g = self:_gather({ lab.dist.rank() })
    self.ranks = {}
    for r = 1, self.world do self.ranks[r] = math.tointeger(g[r][1]) end
  end
  return self.ranks
end

-- gradient norm, global and per module, of the parameters' .grad (after the all-reduce)
local function grad_norms(self)
  local total, by = 0, {}
  lab.no_grad(function()
    for _, np in ipairs(self.named) do
      local g = np[2].grad
      if g then
        local _, sq, nan, inf = lab._summary(g)
        if nan + inf > 0 then sq = 0 / 0 end
        total = total + sq
        local m = self.module_of[np[2]]
        by[m] = (by[m] or 0) + sq
      end
    end
  end)
  for m, sq in pairs(by) do by[m] = math.sqrt(sq) end
  return math.sqrt(total), by
end

-- After backward, before the optimizer step. o.loss: this rank's loss (tensor or number);
-- o.recompute(r): rank r's loss of this step recomputed from the current state (a tensor
-- with its graph, or a number), for the rerun. Returns the step's record.
function Monitor:check(o)
  errors.type("Monitor:check", 1, o, "table", "{loss =, recompute =}")
  local k = self.k or errors.raise("Monitor:check", "call :begin(step) first")
  local loss = lab.is_tensor(o.loss) and o.loss:item() or o.loss
  errors.arg(type(loss) == "number", "Monitor:check", 1, "loss = a tensor or number", o.loss)
  self.collecting = false
  local rec = { step = k, alarms = {} }
  self.records[k] = rec
  self.current = rec
  local compute = (lab.clock() - self.t0) - (lab.dist.comm_time() - self.c0)
  rec.grad_norm, rec.grad_norm_by_module = grad_norms(self)
  -- activation statistics: the largest over ranks
  local names = sorted_keys(self.act)
  local row = { loss, compute, rec.grad_norm }
  for _, n in ipairs(names) do
    local s = self.act[n]
    row[#row + 1], row[#row + 2], row[#row + 3] = s.max, s.rms, s.nonfinite
  end
  local g = self:_gather(row)
  local ranks = self:_ranks()
  rec.ranks = ranks
  rec.loss, rec.time = {}, {}
  -- every decision below is made from gathered values, so every rank takes the same branch
  -- (a rank deciding alone to rerun would leave the others in another collective); the
  -- gradient norm is the largest over ranks (they differ only when a fault made them)
  rec.grad_norm_local = rec.grad_norm
  for r = 1, self.world do
    rec.loss[r], rec.time[r] = g[r][1], g[r][2]
    local n = g[r][3]
    if n ~= n or n > rec.grad_norm then rec.grad_norm = n end
  end
  rec.activations = {}
  for i, n in ipairs(names) do
    local s = { max = 0, rms = 0, nonfinite = 0 }
    for r = 1, self.world do
      local b = 3 + 3 * (i - 1)
      s.max, s.rms = math.max(s.max, g[r][b + 1]), math.max(s.rms, g[r][b + 2])
      s.nonfinite = s.nonfinite + g[r][b + 3]
    end
    s.order = self.act[n].order
    rec.activations[n] = s
  end
  -- cross-rank checks: gradients after the all-reduce, replicas of the weights
  if self.ddp then rec.grad_mismatch = replicas.compare_buckets(self.ddp, self.group) end
  if self.replicas_every > 0 and k % self.replicas_every == 0 then
    rec.replica_mismatch = replicas.check_replicas(self.root, { group = self.group, optimizer = self.optimizer,
      amp = self.amp })
  end
  self:_alarms(rec)
  if rec.suspicious and o.recompute then rec.rerun = self:rerun(o.recompute, rec) end
  rec.verdict = monitor.diagnose(rec, self.world)
  -- the snapshot for the update-to-weight ratio
  lab.no_grad(function()
    self.before = {}
    for i, np in ipairs(self.named) do self.before[i] = np[2]:float():clone() end
  end)
  if rec.verdict == nil then self:_learn(rec) end
  return rec
end

-- alarms against the run's own history (healthy steps only)
function Monitor:_alarms(rec)
  local h, add = self.hist, function(a) rec.alarms[#rec.alarms + 1] = a end
  local ready = #h.grad >= self.warmup
  -- losses: one rank against its own recent lowest, or any NaN
  for r = 1, self.world do
    local l = rec.loss[r]
    local hist = h.loss[r] or {}
    local low = math.huge
    for i = math.max(1, #hist - 4), #hist do low = math.min(low, hist[i]) end
    if not finite(l) then add({ kind = "loss_nonfinite", rank = rec.ranks[r] })
    elseif ready and l > self.loss_jump * low and l > low + 0.1 then
      add({ kind = "loss_jump", rank = rec.ranks[r], value = l, baseline = low })
    end
  end
  local med = median({ table.unpack(h.grad, math.max(1, #h.grad - 9)) })
  if not finite(rec.grad_norm) then add({ kind = "grad_nonfinite" })
  elseif ready and rec.grad_norm > self.grad_jump * med then
    add({ kind = "grad_jump", value = rec.grad_norm, baseline = med })
  end
  for name, s in pairs(rec.activations) do
    local past = h.act[name]
    if s.nonfinite > 0 then add({ kind = "activation_nonfinite", module = name, count = s.nonfinite, order = s.order })
    elseif ready and past and s.max > self.act_jump * past then
      add({ kind = "activation_jump", module = name, value = s.max, baseline = past, order = s.order })
    end
  end
  -- compute time: the slowest rank against the others this step and the run's spread
  local slow, t_slow = nil, -1
  for r = 1, self.world do
    if rec.time[r] > t_slow then slow, t_slow = r, rec.time[r] end
  end
  local others = {}
  for r = 1, self.world do if r ~= slow then others[#others + 1] = rec.time[r] end end
  local typical = median(#others > 0 and others or h.time) or t_slow
  local hist_med = median(h.time)
  rec.slowest = { rank = rec.ranks[slow], time = t_slow, typical = typical }
  -- slow against the others now, against the run's own spread (twice the 90th percentile of
  -- its healthy steps), and by more than min_delay (scheduler noise)
  -- (a pause lasts one step: a straggler is the same rank slow `straggler_steps` in a row)
  -- (one rank alone is no straggler: nobody waits for it, and its slow steps are the machine's)
  local base = math.max(typical, hist_med or typical)
  if ready and self.world > 1 and t_slow > self.straggler_x * base and t_slow > 2 * h.time_p90
      and t_slow - base > self.straggler_min then
    self.streak = self.streak_rank == slow and self.streak + 1 or 1
    self.streak_rank = slow
    if self.streak >= self.straggler_steps then
      add({ kind = "straggler", rank = rec.ranks[slow], value = t_slow, baseline = base, steps = self.streak,
        run_median = hist_med })
    end
  else
    self.streak, self.streak_rank = 0, nil
  end
  for _, m in ipairs(rec.grad_mismatch or {}) do add({ kind = "grad_mismatch", ranks = m.ranks, bucket = m.bucket }) end
  for _, m in ipairs(rec.replica_mismatch or {}) do add({ kind = "replica_mismatch", ranks = m.ranks, name = m.name }) end
  local rerun_on = { loss_jump = true, loss_nonfinite = true, grad_jump = true, grad_nonfinite = true,
    activation_jump = true, activation_nonfinite = true }
  for _, a in ipairs(rec.alarms) do
    if rerun_on[a.kind] then rec.suspicious = true end
  end
end

-- a healthy step joins the baselines
function Monitor:_learn(rec)
  local h = self.hist
  for r = 1, self.world do
    h.loss[r] = h.loss[r] or {}
    table.insert(h.loss[r], rec.loss[r])
  end
  h.grad[#h.grad + 1] = rec.grad_norm
  for name, s in pairs(rec.activations) do h.act[name] = math.max(h.act[name] or 0, s.max) end
  -- a step with a straggler suspect stays out of the time baseline, so the next one still trips
  if self.streak == 0 then
    for r = 1, self.world do h.time[#h.time + 1] = rec.time[r] end
  end
  while #h.time > 50 * self.world do table.remove(h.time, 1) end
  -- the run's spread: the 90th percentile of its healthy compute times (a maximum would let
  -- one pause of the machine blind the check for 50 steps)
  local sorted = { table.unpack(h.time) }
  table.sort(sorted)
  h.time_p90 = sorted[math.max(1, math.ceil(0.9 * #sorted))] or 0
end

-- The rerun: every rank recomputes every rank's loss of this step from the current state
-- (recompute(r) for r = 0 .. world-1, group ranks), and its own local gradient, whose bucket
-- checksums are compared with those taken before the all-reduce. Returns
-- {same_rank = {rank ...} (ranks whose own recomputation differs from the step),
--  disagree = {rank ...} (ranks against the majority on some batch; both at 2 ranks),
--  losses = {[batch rank] = {value per computing rank}}}
function Monitor:rerun(recompute, rec)
  errors.arg(type(recompute) == "function", "Monitor:rerun", 1, "a function recompute(rank) -> loss", recompute)
  errors.arg(type(rec) == "table" and type(rec.loss) == "table" and type(rec.ranks) == "table", "Monitor:rerun", 2,
    "the step's record (what :check returned)", rec)
  local W = self.world
  local me = lab.dist.rank(self.group)
  local mine = {}
  local grads_differ = 0
  for b = 0, W - 1 do
    local value
    if b == me then
      value, grads_differ = self:_recompute_own(recompute, b)
    else
      value = lab.no_grad(function()
        local v = recompute(b)
        return lab.is_tensor(v) and v:item() or v
      end)
    end
    mine[b + 1] = value
  end
  mine[W + 1] = grads_differ
  local g = self:_gather(mine)
  local out = { same_rank = {}, disagree = {}, losses = {} }
  for r = 1, W do
    -- same rank: the recomputed loss or local gradient differs from the step's own
    local l = g[r][r]
    local differs = not (l == rec.loss[r] or (l ~= l and rec.loss[r] ~= rec.loss[r]))
    if differs or g[r][W + 1] > 0 then out.same_rank[#out.same_rank + 1] = rec.ranks[r] end
  end
  local bad = {}
  for b = 1, W do
    local col = {}
    for r = 1, W do col[r] = g[r][b] end
    out.losses[b] = col
    local groups = replicas.majority(col)
    for _, r in ipairs(groups.minority) do bad[rec.ranks[r]] = true end
  end
  for r = 1, W do if bad[rec.ranks[r]] then out.disagree[#out.disagree + 1] = rec.ranks[r] end end
  return out
end

-- this rank's own batch again, with backward: the loss, and 1 when a bucket's local
-- gradient checksum differs from the one taken before this step's all-reduce
function Monitor:_recompute_own(recompute, b)
  local saved = {}
  for i, np in ipairs(self.named) do
    saved[i] = np[2].grad
    np[2].grad = nil
  end
  local value, differs = nil, 0
  local ok, err = pcall(function()
    local function run()
      local v = recompute(b)
      if lab.is_tensor(v) and v.requires_grad then v:backward() end
      value = lab.is_tensor(v) and v:item() or v
    end
    if self.ddp then self.ddp:no_sync(run) else run() end
    if self.ddp and self.pre_sums then
      for i, bk in ipairs(self.ddp.buckets) do
        local parts = {}
        local order = {}
        for _, p in ipairs(bk.params) do order[#order + 1] = p end
        table.sort(order, function(x, y) return self.ddp.slot[x].offset < self.ddp.slot[y].offset end)
        for _, p in ipairs(order) do
          parts[#parts + 1] = p.grad and p.grad:reshape(p:numel()) or lab.zeros(p:numel(), { dtype = p.dtype, device = p.device })
        end
        local flat = lab.no_grad(function() return lab.cat(parts, 1):to(bk.dtype) end)
        if self.pre_sums[i] and flat:checksum() ~= self.pre_sums[i] then differs = 1 end
      end
    end
  end)
  for i, np in ipairs(self.named) do np[2].grad = saved[i] end
  if not ok then error(err, 0) end
  return value, differs
end

-- The layer a step's alarms point to, from the measurements alone, or nil when healthy:
-- {layer = "hardware" | "communication" | "numeric" | "data", ranks =, module =, why =}
function monitor.diagnose(rec, world)
  errors.arg(type(rec) == "table" and type(rec.alarms) == "table", "lab.monitor.diagnose", 1,
    "a monitor record (with alarms)", rec)
  errors.arg(math.type(world) == "integer" and world >= 1, "lab.monitor.diagnose", 2, "the world size", world)
  local by = {}
  for _, a in ipairs(rec.alarms) do
    by[a.kind] = by[a.kind] or {}
    table.insert(by[a.kind], a)
  end
  local function ranks_of(list)
    local set, out = {}, {}
    for _, a in ipairs(list) do
      for _, r in ipairs(a.ranks or { a.rank }) do
        if not set[r] then set[r], out[#out + 1] = true, r end
      end
    end
    table.sort(out)
    return out
  end
  local rr = rec.rerun
  if by.replica_mismatch then
    local names = {}
    for _, a in ipairs(by.replica_mismatch) do names[#names + 1] = a.name end
    return { layer = "hardware", ranks = ranks_of(by.replica_mismatch),
      why = "weights differ across replicas: " .. table.concat(names, ", ", 1, math.min(3, #names)) }
  end
  if rr and #rr.same_rank > 0 then
    return { layer = "hardware", ranks = rr.same_rank, why = "recomputing the step on the same rank gave another result" }
  end
  if rr and #rr.disagree > 0 then
    return { layer = "hardware", ranks = rr.disagree, why = "the same batch computed on another rank gives another result" }
  end
  if by.grad_mismatch then
    return { layer = "communication", ranks = ranks_of(by.grad_mismatch),
      why = "gradients differ across ranks after the all-reduce" }
  end
  local act = by.activation_nonfinite or by.activation_jump
  if act then
    -- where it began: the module whose forward finished first with it (the innermost)
    table.sort(act, function(a, b) return a.order < b.order end)
    return { layer = "numeric", module = act[1].module, ranks = {},
      why = string.format("%s in the output of %s", act[1].kind == "activation_nonfinite" and "NaN/Inf" or
        "an activation jump", act[1].module) }
  end
  if by.loss_jump or by.loss_nonfinite or by.grad_jump or by.grad_nonfinite then
    local jumps = by.loss_jump or by.loss_nonfinite or {}
    local r = ranks_of(jumps)
    if #r > 0 and #r < world then
      return { layer = "data", ranks = r, why = "one rank's loss alone, and the rerun reproduces it" }
    end
    if world == 1 and #r > 0 then -- no other rank to compare with: no activation sign, reproducible
      return { layer = "data", ranks = r, why = "the loss alone (no activation sign), and the rerun reproduces it" }
    end
    return { layer = "numeric", ranks = r, why = "every rank at once, and the rerun reproduces it" }
  end
  if by.straggler then
    return { layer = "hardware", ranks = ranks_of(by.straggler), why = string.format(
      "straggler: compute time %.3f s against a typical %.3f s", by.straggler[1].value, by.straggler[1].baseline) }
  end
  return nil
end

-- After the optimizer step: the update-to-weight ratio, and the record's JSON line.
function Monitor:finish()
  local rec = self.current
  if not rec then return end
  local du, w = 0, 0
  lab.no_grad(function()
    for i, np in ipairs(self.named) do
      local now = np[2]:float()
      du = du + select(2, lab._summary(now - self.before[i]))
      w = w + select(2, lab._summary(now))
    end
  end)
  rec.update_ratio = math.sqrt(du) / math.sqrt(w)
  self.before = nil
  if self.jsonl then
    self.jsonl:write(lab.monitor.to_json(rec), "\n")
    self.jsonl:flush()
  end
  self.current = nil
end

-- a record as one JSON object (non-finite numbers as strings, as JSON has none)
function monitor.to_json(v)
  local t = type(v)
  if t == "number" then
    if v ~= v then return '"nan"' end
    if v == math.huge then return '"inf"' elseif v == -math.huge then return '"-inf"' end
    return math.type(v) == "integer" and tostring(v) or string.format("%.9g", v)
  elseif t == "string" then return string.format("%q", v):gsub("\\\n", "\\n")
  elseif t == "boolean" then return tostring(v)
  elseif t == "table" then
    if #v > 0 or next(v) == nil then
      local parts = {}
      for i, x in ipairs(v) do parts[i] = monitor.to_json(x) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys = {}
    for key in pairs(v) do keys[#keys + 1] = tostring(key) end
    table.sort(keys)
    local parts = {}
    for _, key in ipairs(keys) do parts[#parts + 1] = string.format("%q:%s", key, monitor.to_json(v[key])) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  return "null"
end

return monitor
