-- lab.nn: modules in the manner of torch.nn. A module holds parameters (tensors that
-- require grad) and child modules as fields, remembers the order they were added in (so
-- parameters() and state_dict() are the same on every rank), and is called to run forward.
-- Backward is autograd's: modules never write it by hand.
local errors = require("lab.errors")
local sorted_keys = require("lab.sorted_keys")
local nn = {}

local Module = {}
Module.__index = Module
nn.Module = Module

-- Forward hooks, as PyTorch's register_forward_pre_hook / register_forward_hook: a module
-- with none runs `self:forward(...)` after one test of an upvalue (`slow` is false while no
-- module anywhere has a hook and nobody tracks the module stack). lab.monitor takes
-- activation statistics here, lab.fault scales an activation, and anomaly mode
-- (lab.autograd.detect_anomaly) reads the stack of modules whose forward is running.
local slow, hooks_alive, tracking = false, 0, 0
local stack = {} -- the modules whose forward runs now, outermost first (while tracking)
local pop = setmetatable({}, { __close = function() stack[#stack] = nil end })

local function run_hooked(self, ...)
  local args = table.pack(...)
  local pre = rawget(self, "_forward_pre_hooks")
  if pre then
    for _, h in ipairs({ table.unpack(pre) }) do -- a copy: a hook may remove itself
      local r = h.fn(self, args)
      if r ~= nil then args = type(r) == "table" and not lab.is_tensor(r) and r or table.pack(r) end
      args.n = args.n or #args
    end
  end
  local out
  do
    if tracking > 0 then stack[#stack + 1] = self end
    local _ <close> = tracking > 0 and pop or nil
    out = table.pack(self:forward(table.unpack(args, 1, args.n)))
  end
  local post = rawget(self, "_forward_hooks")
  if post then
    for _, h in ipairs({ table.unpack(post) }) do
      local r = h.fn(self, args, table.unpack(out, 1, out.n))
      if r ~= nil then out[1] = r end
    end
  end
  return table.unpack(out, 1, out.n)
end

-- the __call of every module class
local function call(self, ...)
  if not slow then return self:forward(...) end
  return run_hooked(self, ...)
end

local function add_hook(self, field, fn, op)
  errors.arg(type(fn) == "function", op, 1, "a function (module, inputs[, output]) -> replacement or nil", fn)
  local list = rawget(self, field)
  if not list then
    list = {}
    rawset(self, field, list)
  end
  local h = { fn = fn }
  list[#list + 1] = h
  hooks_alive = hooks_alive + 1
  slow = true
  -- the handle, as PyTorch's RemovableHandle: handle:remove() (a second remove does nothing)
  return { remove = function()
    for i, x in ipairs(list) do
      if x == h then
        table.remove(list, i)
        hooks_alive = hooks_alive - 1
        slow = hooks_alive > 0 or tracking > 0
        return
      end
    end
  end }
end

-- fn(module, inputs) runs before forward; inputs is the packed argument list
-- ({n=, ...}); returning a table (or one tensor) replaces the arguments
function Module:register_forward_pre_hook(fn)
  return add_hook(self, "_forward_pre_hooks", fn, "Module:register_forward_pre_hook")
end

-- fn(module, inputs, output, ...) runs after forward (output: its first result, the others
-- follow); returning a value replaces the first result
function Module:register_forward_hook(fn)
  return add_hook(self, "_forward_hooks", fn, "Module:register_forward_hook")
end

-- Module-stack tracking on (true) or off (false), counted: while on, nn.module_stack()
-- lists the modules whose forward is running. Anomaly mode turns it on.
function nn._track_modules(on)
  tracking = math.max(0, tracking + (on and 1 or -1))
  if tracking == 0 then for i = #stack, 1, -1 do stack[i] = nil end end
  slow = hooks_alive > 0 or tracking > 0
end
function nn.module_stack() return stack end

-- A new module class: `local Linear = nn.class("Linear")`, constructor Linear.new(self, ...)
function nn.class(name, parent)
  errors.type("lab.nn.class", 1, name, "string", "a class name (string)")
  errors.arg(parent == nil or (type(parent) == "table" and type(rawget(parent, "__name")) == "string"), "lab.nn.class", 2,
    "a parent class (e.g. lab.nn.Module) or nil", parent)
  local cls = setmetatable({}, { __index = parent or Module })
  cls.__index = cls
  cls.__name = name
  cls.__call = call
  cls.__tostring = Module.__tostring
  setmetatable(cls, {
    __index = parent or Module,
    __call = function(c, ...)
      local obj = setmetatable({ _names = {}, _kinds = {}, training = true }, c)
      -- an error while building (a size that cannot exist, a bad option) names the module
      local ok, err = pcall(obj.init, obj, ...)
      if not ok then
        if type(err) ~= "string" then error(err, 0) end
        local r, rest = err:match("^rank (%d+): (.*)$")
        rest = rest or err
        if rest:sub(1, #name + 2) == name .. ": " then rest = rest:sub(#name + 3) end -- named once
        error(string.format("rank %s: %s: %s", r or lab.dist.rank(), name, rest), 0)
      end
      return obj
    end,
  })
  return cls
end

function Module:init() end

-- a container (ModuleList, a bare Module) has no forward of its own: calling one names it
function Module:forward()
  errors.raise(tostring(getmetatable(self).__name or "Module"), "has no forward (a container: call its children)")
end

-- true for an instance of any lab.nn module class
function nn.is_module(m)
  return type(m) == "table" and type(rawget(m, "_names")) == "table" and type(rawget(m, "_kinds")) == "table"
end

-- raises a named error unless m is a module (for functions that walk a model)
function nn.check_module(m, op)
  if not nn.is_module(m) then
    error(string.format("rank %d: %s: expected a lab.nn module, got %s", lab.dist.rank(), op,
      lab.is_tensor(m) and "a tensor" or type(m)), 0)
  end
end

-- a parameter, buffer or child under name: names keep their first registration's order
local METHOD = { param = "Module:param", buffer = "Module:buffer", module = "Module:add" }
local function register(self, name, kind, value)
  if not nn.is_module(self) then -- e.g. MyClass:param(...) on the class, outside init
    errors.raise(METHOD[kind], "self must be a module (call self:%s(...) inside init), got %s", METHOD[kind]:sub(8),
      type(self) == "table" and rawget(self, "__name") and ("the class " .. tostring(rawget(self, "__name"))) or type(self))
  end
  if self._kinds[name] == nil then self._names[#self._names + 1] = name end
  self._kinds[name] = kind
  self[name] = value
  return value
end

-- registers a parameter: it requires grad and is accounted as parameter memory
function Module:param(name, t)
  errors.arg(type(name) == "string", "Module:param", 1, "a name (string)", name)
  errors.arg(t == nil or lab.is_tensor(t), "Module:param", 2, "a tensor or nil", t)
  if t ~= nil then
    t:requires_grad_(true)
    lab.mem.tag(t, "param")
  end
  return register(self, name, "param", t)
end

-- registers a buffer: saved in state_dict, not trained
function Module:buffer(name, t)
  errors.arg(type(name) == "string", "Module:buffer", 1, "a name (string)", name)
  return register(self, name, "buffer", t)
end

-- true if `m` is `self` or contains it: a module inside itself makes every walk (printing,
-- parameters, state_dict) loop forever
local function contains(m, target, seen)
  if m == target then return true end
  if seen[m] then return false end
  seen[m] = true
  for _, c in ipairs(m:children()) do
    if contains(c, target, seen) then return true end
  end
  return false
end

function Module:add(name, m)
  errors.arg(type(name) == "string" or math.type(name) == "integer", "Module:add", 1, "a name (string)", name)
  errors.module("Module:add", 2, m)
  name = tostring(name)
  if nn.is_module(m) and contains(m, self, {}) then
    error(string.format("rank %d: %s.add: a module cannot contain itself (cycle through '%s')", lab.dist.rank(),
      getmetatable(self).__name or "Module", tostring(name)), 0)
  end
  return register(self, name, "module", m)
end

function Module:children()
  local out = {}
  for _, n in ipairs(self._names) do
    if self._kinds[n] == "module" then out[#out + 1] = self[n] end
  end
  return out
end

-- {name, tensor} pairs in registration order, depth first: "blocks.1.attn.qkv.weight"
function Module:named_parameters(prefix, out, seen)
  errors.arg(prefix == nil or type(prefix) == "string", "Module:named_parameters", 1, "a name prefix (string) or nil", prefix)
  errors.arg(out == nil or type(out) == "table", "Module:named_parameters", 2, "a table to fill or nil", out)
  errors.arg(seen == nil or type(seen) == "table", "Module:named_parameters", 3, "a table of parameters seen or nil", seen)
  out, seen = out or {}, seen or {}
  prefix = prefix or ""
  for _, n in ipairs(self._names) do
    local v, kind = self[n], self._kinds[n]
    if kind == "param" and v ~= nil and not seen[v] then
      seen[v] = true -- a tied weight appears once
      out[#out + 1] = { prefix .. n, v }
    elseif kind == "module" then
      v:named_parameters(prefix .. n .. ".", out, seen)
    end
  end
  return out
end

function Module:parameters()
  local out = {}
  for i, p in ipairs(self:named_parameters()) do out[i] = p[2] end
  return out
end

function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

function Module:state_dict(prefix, out)
  errors.arg(prefix == nil or type(prefix) == "string", "Module:state_dict", 1, "a name prefix (string) or nil", prefix)
  errors.arg(out == nil or type(out) == "table", "Module:state_dict", 2, "a table to fill or nil", out)
  out, prefix = out or {}, prefix or ""
  for _, n in ipairs(self._names) do
    local v, kind = self[n], self._kinds[n]
    if (kind == "param" or kind == "buffer") and v ~= nil then out[prefix .. n] = v
    elseif kind == "module" then v:state_dict(prefix .. n .. ".", out) end
  end
  return out
end

-- copies values in; with strict (default) every key must match both ways, shapes too
function Module:load_state_dict(sd, strict)
  errors.arg(type(sd) == "table" and not nn.is_module(sd), "Module:load_state_dict", 1,
    "a state dict (name -> tensor)", sd)
  for k, v in pairs(sd) do
    if not lab.is_tensor(v) then errors.raise("Module:load_state_dict", "%s is a %s, not a tensor", tostring(k), type(v)) end
  end
  if strict == nil then strict = true end
  local mine = self:state_dict()
  local names = sorted_keys(mine) -- the same key is reported first on every rank and every run
  lab.no_grad(function()
    for _, k in ipairs(names) do
      local t = mine[k]
      local src = sd[k]
      if src == nil then
        if strict then errors.raise("Module:load_state_dict", "missing key %s", k) end
      else
        if table.concat(src.shape, ",") ~= table.concat(t.shape, ",") then
          errors.raise("Module:load_state_dict", "%s has shape [%s] in the file, [%s] in the model", k,
            table.concat(src.shape, ", "), table.concat(t.shape, ", "))
        end
        t:copy_(src)
      end
    end
  end)
  if strict then
    for k in pairs(sd) do
      if mine[k] == nil then errors.raise("Module:load_state_dict", "unexpected key %s", tostring(k)) end
    end
  end
end

function Module:train(mode)
  errors.arg(mode == nil or type(mode) == "boolean", "Module:train", 1, "a boolean or nil", mode)
  if mode == nil then mode = true end
  self.training = mode
  for _, c in ipairs(self:children()) do c:train(mode) end
  return self
end

function Module:eval() return self:train(false) end

-- Moves every parameter (with its gradient) and every buffer to a device, as torch's
-- Module.to: parameters keep their identity, so optimizers and hooks made before still
-- hold them. Returns the module.
function Module:to(device)
  errors.arg(type(device) == "string", "Module:to", 1, "a device name (string)", device)
  for _, p in ipairs(self:parameters()) do
    local g = p.grad
    p.grad = nil
    lab._move_(p, device)
    if g ~= nil then p.grad = g:to(device) end
  end
  local function move_buffers(m)
    for _, n in ipairs(m._names) do
      local v, kind = m[n], m._kinds[n]
      if kind == "buffer" and lab.is_tensor(v) then m[n] = v:to(device)
      elseif kind == "module" then move_buffers(v) end
    end
  end
  move_buffers(self)
  return self
end

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

local function count_own(m)
  local n = 0
  for _, name in ipairs(m._names) do
    if m._kinds[name] == "param" and m[name] ~= nil then n = n + m[name]:numel() end
  end
  return n
end

local function describe(m)
  return m.describe and m:describe() or ""
end

-- the module tree with parameter counts, like print(model) in PyTorch
function Module:__tostring()
  local lines = {}
  local function walk(mod, name, depth)
    local total = mod:num_parameters()
    lines[#lines + 1] = string.format("%s%s%s(%s)  %s params", string.rep("  ", depth),
      name and (name .. ": ") or "", getmetatable(mod).__name or "Module", describe(mod), total)
    for _, n in ipairs(mod._names) do
      if mod._kinds[n] == "module" then walk(mod[n], n, depth + 1) end
    end
  end
  walk(self, nil, 0)
  return table.concat(lines, "\n")
end

-- ---- layers ----

-- y = x W^T + b, W of shape [out, in] as in PyTorch; initialised U(-1/sqrt(in), 1/sqrt(in))
local Linear = nn.class("Linear")
nn.Linear = Linear
function Linear:init(n_in, n_out, opts)
  opts = errors.sizes("Linear", opts, n_in, "in features", n_out, "out features")
  self.n_in, self.n_out = n_in, n_out
  local bound = 1 / math.sqrt(n_in)
  local dtype = opts.dtype or "f32"
  self:param("weight", lab.empty(n_out, n_in, { dtype = dtype }):uniform_(-bound, bound))
  if opts.bias ~= false then
    self:param("bias", lab.empty(n_out, { dtype = dtype }):uniform_(-bound, bound))
  end
end
function Linear:describe() return string.format("%d -> %d%s", self.n_in, self.n_out, self.bias and "" or ", no bias") end
-- x [..., in] -> x W^T + b [..., out] for W [out, in]: the leading dims are folded into one
-- matrix, so it is one large GEMM instead of a loop of small ones, with the bias added in the
-- GEMM (lab.linear; every linear layer, sharded or not, computes through this)
function nn.linear(x, weight, bias) return lab.linear(x, weight, bias) end

function Linear:forward(x) return nn.linear(x, self.weight, self.bias) end

local Embedding = nn.class("Embedding")
nn.Embedding = Embedding
function Embedding:init(num, dim, opts)
  opts = errors.sizes("Embedding", opts, num, "number of embeddings", dim, "embedding size")
  self.num, self.dim = num, dim
  self:param("weight", lab.randn(num, dim, { dtype = opts.dtype or "f32" }))
end
function Embedding:describe() return string.format("%d x %d", self.num, self.dim) end
-- ids count from 0 (they are data values, as in PyTorch and in .npy files)
function Embedding:forward(ids) return lab.embedding(ids, self.weight) end

local LayerNorm = nn.class("LayerNorm")
nn.LayerNorm = LayerNorm
function LayerNorm:init(dim, opts)
  opts = errors.sizes("LayerNorm", opts, dim, "size")
  self.dim, self.eps = dim, opts.eps or 1e-5
  if opts.elementwise_affine ~= false then
    self:param("weight", lab.ones(dim))
    self:param("bias", lab.zeros(dim))
  end
end
function LayerNorm:describe() return tostring(self.dim) end
function LayerNorm:forward(x) return lab.layer_norm(x, self.weight, self.bias, self.eps) end

local RMSNorm = nn.class("RMSNorm")
nn.RMSNorm = RMSNorm
function RMSNorm:init(dim, opts)
  opts = errors.sizes("RMSNorm", opts, dim, "size")
  self.dim, self.eps = dim, opts.eps or 1e-6
  self:param("weight", lab.ones(dim))
end
function RMSNorm:describe() return tostring(self.dim) end
function RMSNorm:forward(x) return lab.rms_norm(x, self.weight, self.eps) end

local GELU = nn.class("GELU")
nn.GELU = GELU
function GELU:init(opts)
  errors.opts("GELU", 1, opts)
  self.approximate = (opts or {}).approximate or "none"
  errors.arg(type(self.approximate) == "string", "GELU", 1, "approximate = 'none' or 'tanh'", self.approximate)
end
function GELU:describe() return self.approximate end
function GELU:forward(x)
  errors.tensor("GELU:forward", 1, x)
  return x:gelu(self.approximate)
end

local Dropout = nn.class("Dropout")
nn.Dropout = Dropout
function Dropout:init(p)
  errors.arg(p == nil or type(p) == "number", "Dropout", 1, "a probability", p)
  self.p = p or 0.5
end
function Dropout:describe() return tostring(self.p) end
function Dropout:forward(x) return lab.dropout(x, self.p, self.training) end

-- A list of child modules named "1".."n" (self.n of them), as Sequential and ModuleList are:
-- :append, :at(i), :iter(), #m, and integer keys as in PyTorch (model.blocks[1]): an integer
-- (or an integral float, or a negative one counting from the end) reads the child named "1".
-- The names stay strings, so named_parameters ("blocks.1.attn...") and state_dict keys do not
-- change. Past the end is nil, which is what ipairs (it honours __index) stops at. m[i] = module
-- replaces child i (1..n); appending stays :append, so the list has no holes.
local function list_of_children(cls)
  local name = cls.__name
  function cls:append(m)
    self:add(tostring(self.n + 1), m) -- counted once added: a refused append leaves no gap
    self.n = self.n + 1
    return self
  end
  function cls:at(i) return self[tostring(i)] end
  function cls:iter()
    local i = 0
    return function()
      i = i + 1
      if i <= self.n then return i, self[tostring(i)] end
    end
  end
  local function child_name(self, k)
    if math.type(k) == "float" then k = math.tointeger(k) end
    if math.type(k) ~= "integer" then return nil end
    if k < 0 then k = rawget(self, "n") + 1 + k end
    return tostring(k)
  end
  cls.__index = function(self, k)
    local child = child_name(self, k)
    if child then return rawget(self, child) end
    return cls[k]
  end
  cls.__newindex = function(self, k, v)
    local child = child_name(self, k)
    if not child then return rawset(self, k, v) end
    local i = tonumber(child)
    if i < 1 or i > self.n then
      error(string.format("rank %d: %s: index %s is outside 1..%d (use :append to add one)",
        lab.dist.rank(), name, tostring(k), self.n), 0)
    end
    nn.check_module(v, name .. "[" .. tostring(k) .. "]")
    self:add(child, v)
  end
  cls.__len = function(self) return self.n end
end

local Sequential = nn.class("Sequential")
nn.Sequential = Sequential
list_of_children(Sequential)
function Sequential:init(...)
  local mods = { ... }
  if #mods == 1 and type(mods[1]) == "table" and getmetatable(mods[1]) == nil then mods = mods[1] end
  for i = 1, select("#", ...) > 1 and select("#", ...) or #mods do errors.module("Sequential", i, mods[i]) end
  self.n = 0
  for _, m in ipairs(mods) do self:append(m) end
end
function Sequential:forward(x)
  for i = 1, self.n do x = self[tostring(i)](x) end
  return x
end

local ModuleList = nn.class("ModuleList")
nn.ModuleList = ModuleList
list_of_children(ModuleList)
function ModuleList:init(mods)
  errors.arg(mods == nil or (type(mods) == "table" and not nn.is_module(mods)), "ModuleList", 1, "a list of modules", mods)
  self.n = 0
  for _, m in ipairs(mods or {}) do self:append(m) end
end

local CrossEntropyLoss = nn.class("CrossEntropyLoss")
nn.CrossEntropyLoss = CrossEntropyLoss
function CrossEntropyLoss:init(opts) self.opts = opts or {} end
function CrossEntropyLoss:forward(logits, target) return lab.cross_entropy(logits, target, self.opts) end

return nn
