-- lab.fault: faults a lab plants on purpose, one per layer of a loss spike (data is the
-- lab's own: a bad batch), so that lab.monitor can be shown to find them:
--   hardware: flip_bit{what = "param" | "grad" | "optimizer", ...}  (silent data corruption)
--             straggler{rank =, delay = s | {min, max}}                (a slow rank)
--   communication: corrupt_collective{rank =, step =, mode = "element" | "bit" | "wrong_op"}
--   numeric:  overflow{module =, scale =, ...}  (an activation scaled inside one forward)
--             nan{op =, backward =}             (a NaN planted in one fused op's output)
-- The training loop tells the faults the step: lab.fault.step(k) at the start of step k
-- fires what is due then on this rank. Every fault is off until armed, costs nothing while
-- off (no hook, no wrapper: collectives and forwards are wrapped only while a fault waits
-- for them) and prints one line when it fires: "rank 2: lab.fault: step 30: ...".
-- lab.fault.clear() disarms everything; lab.fault.fired lists what fired.
local errors = require("lab.errors")
local fault = { fired = {} }

local pending = {} -- armed faults: {kind, step, rank, fire = function(k)}
local current_step = 0
local undo = {}    -- functions that remove wrappers and hooks, run by clear()

local function here() return lab.dist.rank() end

local function report(k, fmt, ...)
  local msg = string.format("rank %d: lab.fault: step %d: " .. fmt, here(), k, ...)
  fault.fired[#fault.fired + 1] = msg
  print(msg)
end

local function check_common(op, o)
  errors.type(op, 1, o, "table", "an options table")
  errors.arg(o.rank == nil or math.type(o.rank) == "integer", op, 1, "rank = an integer (global rank) or nil", o.rank)
  errors.arg(o.step == nil or math.type(o.step) == "integer", op, 1, "step = an integer", o.step)
end

local function mine(o) return o.rank == nil or o.rank == here() end

-- the named parameter of a module (or wrapper)
local function param_of(op, model, name)
  local m = model and (model.module or model) or nil
  errors.arg(m ~= nil and lab.nn.is_module(m), op, 1, "model = a lab.nn module or wrapper", model)
  for _, np in ipairs(m:named_parameters()) do
    if np[1] == name then return np[2] end
  end
  errors.raise(op, "the model has no parameter %s", tostring(name))
end

function fault.step(k)
  errors.arg(math.type(k) == "integer", "lab.fault.step", 1, "the step number (integer)", k)
  current_step = k
  if #pending == 0 then return end
  local keep = {}
  for _, f in ipairs(pending) do
    if f.step == nil or f.step == k then
      if f.fire(k) ~= "again" then goto continue end
    end
    keep[#keep + 1] = f
    ::continue::
  end
  pending = keep
end

function fault.current_step() return current_step end

local function arm(o, fire) pending[#pending + 1] = { step = o.step, fire = fire } end

-- fire(k) at every step k in [from, to]; kept armed until step to has passed
local function arm_steps(from, to, fire)
  pending[#pending + 1] = { fire = function(k)
    if k > to then return nil end
    if k >= from then fire(k) end
    return "again"
  end }
end

-- flip_bit{what = "param", model =, name =, index = 1, bit = 30, rank =, step =}
-- flip_bit{what = "param", tensor = t, ...}: a tensor given directly (an amp master, say)
-- flip_bit{what = "grad", model = ddp_wrapper, name =, ...}: in this rank's local gradient,
--   in its DDP bucket before the all-reduce (an error in the backward's arithmetic)
-- flip_bit{what = "optimizer", optimizer =, param_index =, state = "m", ...}
-- index counts elements from 1 (row-major), bit from 0 (the lowest; 31 is an f32's sign)
function fault.flip_bit(o)
  local op = "lab.fault.flip_bit"
  check_common(op, o)
  errors.arg(o.what == "param" or o.what == "grad" or o.what == "optimizer", op, 1,
    "what = 'param', 'grad' or 'optimizer'", o.what)
  local index, bit = o.index or 1, o.bit or 30
  errors.arg(math.type(index) == "integer" and index >= 1, op, 1, "index = an element number from 1", index)
  errors.arg(math.type(bit) == "integer" and bit >= 0, op, 1, "bit = a bit number from 0", bit)
  if not mine(o) then return end
  if o.what == "param" then
    local t = o.tensor or param_of(op, o.model, o.name)
    arm(o, function(k)
      lab._flip_bit(t, index, bit)
      report(k, "flipped bit %d of element %d of parameter %s (%s)", bit, index, o.name or "(tensor)", t.dtype)
    end)
  elseif o.what == "optimizer" then
    errors.arg(type(o.optimizer) == "table" and type(o.optimizer.state) == "table", op, 1,
      "optimizer = a lab.optim optimizer", o.optimizer)
    arm(o, function(k)
      local st = o.optimizer.state[o.param_index or 1]
      local t = st and st[o.state or "m"]
      if not lab.is_tensor(t) then
        errors.raise(op, "the optimizer has no state %s for parameter %d yet (flip after its first step)",
          tostring(o.state or "m"), o.param_index or 1)
      end
      lab._flip_bit(t, index, bit)
      report(k, "flipped bit %d of element %d of optimizer state %s of parameter %d", bit, index, o.state or "m",
        o.param_index or 1)
    end)
  else
    local ddp = o.model
    errors.arg(type(ddp) == "table" and type(ddp.slot) == "table" and ddp.buckets, op, 1,
      "model = a lab.ddp wrapper (the gradient is flipped in its bucket)", ddp)
    local p = param_of(op, ddp, o.name)
    arm(o, function(k)
      -- wraps this wrapper's bucket launch for one step: the flip lands in the local
      -- gradient just before the all-reduce takes it
      local prev = rawget(ddp, "_launch") -- another wrapper (lab.monitor's) stays in the chain
      local inner = prev or getmetatable(ddp).__index._launch
      rawset(ddp, "_launch", function(self, b)
        local s = self.slot[p]
        if s.bucket == b then
          rawset(self, "_launch", prev)
          lab._flip_bit(b.buffer, s.offset + index - 1, bit)
          report(k, "flipped bit %d of element %d of the local gradient of %s (before its all-reduce)", bit, index,
            o.name)
        end
        return inner(self, b)
      end)
      undo[#undo + 1] = function() rawset(ddp, "_launch", prev) end
    end)
  end
end

-- corrupt_collective{rank =, step =, call = 1, mode = "element" | "bit" | "wrong_op",
--   index = 1, bit = 30, value = 1e4}: the call-th all_reduce of that step on that rank
-- returns a corrupted result there (one element set to value, one bit flipped, or the sum
-- where the average was asked: what a wrong op on one rank gives)
function fault.corrupt_collective(o)
  local op = "lab.fault.corrupt_collective"
  check_common(op, o)
  errors.arg(math.type(o.rank) == "integer", op, 1, "rank = the rank whose result is corrupted", o.rank)
  local mode = o.mode or "element"
  errors.arg(mode == "element" or mode == "bit" or mode == "wrong_op", op, 1, "mode = 'element', 'bit' or 'wrong_op'", mode)
  if not mine(o) then return end
  local dist = lab.dist
  local original = dist.all_reduce
  local count, done = 0, false
  local function restore()
    if dist.all_reduce ~= original then dist.all_reduce = original end
  end
  local function corrupt(t, opts)
    done = true
    restore()
    local k = current_step
    if mode == "element" then
      lab.no_grad(function() t:view(-1)[o.index or 1] = o.value or 1e4 end)
      report(k, "all_reduce result element %d set to %g", o.index or 1, o.value or 1e4)
    elseif mode == "bit" then
      lab._flip_bit(t, o.index or 1, o.bit or 30)
      report(k, "all_reduce result element %d: bit %d flipped", o.index or 1, o.bit or 30)
    else
      local n = dist.world(opts and opts.group or nil)
      lab.no_grad(function() t:mul_(n) end)
      report(k, "all_reduce result summed instead of averaged (x%d)", n)
    end
  end
  arm(o, function()
    dist.all_reduce = function(t, opts)
      local h = original(t, opts)
      if done then return h end
      count = count + 1
      if count < (o.call or 1) then return h end
      if not (opts and opts.async) then
        corrupt(t, opts)
        return h
      end
      -- asynchronous: the result exists once waited for
      local proxy = {}
      function proxy.wait(_)
        local r = h:wait()
        if not done then corrupt(t, opts) end
        return r
      end
      function proxy.test(_) return h:test() end
      return setmetatable(proxy, { __index = function(_, key)
        local v = h[key]
        if type(v) == "function" then return function(_, ...) return v(h, ...) end end
        return v
      end })
    end
    undo[#undo + 1] = restore
  end)
end

-- straggler{rank =, delay = seconds | {min, max}, from = 1, to = math.huge}: at every step
-- in [from, to] that rank sleeps (a fixed delay, or uniform in [min, max]) before its work
function fault.straggler(o)
  local op = "lab.fault.straggler"
  check_common(op, o)
  local d = o.delay
  errors.arg(type(d) == "number" and d >= 0 or (type(d) == "table" and type(d[1]) == "number" and type(d[2]) == "number"),
    op, 1, "delay = seconds, or {min, max}", d)
  if not mine(o) then return end
  local from, to = o.from or 1, o.to or math.huge
  arm_steps(from, to, function(k)
    local s = type(d) == "number" and d or d[1] + math.random() * (d[2] - d[1])
    lab._sleep(s)
    report(k, "straggler: slept %.3f s", s)
  end)
end

-- overflow{model =, name = "blocks.1.attn.qkv", scale = 2^66, cols = {from, to}, rank =,
--   step = (one step) or from/to}: that module's output is multiplied by scale (only
--   columns from..to of its last dimension, when given) in its forward
function fault.overflow(o)
  local op = "lab.fault.overflow"
  check_common(op, o)
  errors.arg(type(o.scale) == "number", op, 1, "scale = a number", o.scale)
  if not mine(o) then return end
  local root = o.model and (o.model.module or o.model)
  local target
  errors.arg(root ~= nil and lab.nn.is_module(root), op, 1, "model = a lab.nn module", o.model)
  local function find(m, prefix)
    if prefix == o.name then target = m end
    for _, n in ipairs(m._names) do
      if m._kinds[n] == "module" then find(m[n], prefix == "" and n or prefix .. "." .. n) end
    end
  end
  find(root, "")
  if not target then errors.raise(op, "the model has no module %s", tostring(o.name)) end
  local from, to = o.from or o.step or 1, o.to or o.step or math.huge
  local handle, announced
  arm_steps(from, to, function()
    if handle then return end -- the hook stays on from step from to step to
    handle = target:register_forward_hook(function(_, _, out)
      if current_step > to then
        handle:remove()
        return nil
      end
      local C = out.shape[#out.shape]
      local a, b = o.cols and o.cols[1] or 1, o.cols and o.cols[2] or C
      local v = lab.ones(C, { dtype = out.dtype, device = out.device })
      lab.no_grad(function() v:narrow(1, a, b - a + 1):fill_(o.scale) end)
      if not announced then -- printed once: it fires in every forward until step `to`
        announced = true
        report(current_step, "overflow: output of %s (columns %d-%d) scaled by %g in every forward%s", o.name, a, b,
          o.scale, to < math.huge and " to step " .. to or "")
      end
      return out * v
    end)
    undo[#undo + 1] = function() handle:remove() end
  end)
end

-- nan{op = "layer_norm", backward = false, rank =, step =}: the next output (or input
-- gradient, backward = true) of that autograd op on that rank gets a NaN in element 1
function fault.nan(o)
  local op = "lab.fault.nan"
  check_common(op, o)
  errors.arg(type(o.op) == "string", op, 1, "op = the autograd op's name ('linear', 'layer_norm', ...)", o.op)
  if not mine(o) then return end
  arm(o, function(k)
    lab._plant_nan(o.op, o.backward or false, function(name, bw)
      report(k, "NaN planted in %s of %s", bw and "an input gradient" or "the output", name)
    end)
  end)
end

-- disarms every fault and removes every wrapper and hook
function fault.clear()
  pending = {}
  for i = #undo, 1, -1 do undo[i]() end
  undo = {}
  lab._plant_nan(nil)
  current_step = 0
end

return fault
