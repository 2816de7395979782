-- lab.autograd.detect_anomaly: PyTorch's anomaly mode. While it is on, every op that records
-- a node checks its output for NaN and Inf, and every backward function its input gradients;
-- the first non-finite value raises, naming the op, the module whose forward ran it, that
-- forward's traceback and the rank:
--   lab.autograd.detect_anomaly(function() loss = model(x, y); loss:backward() end)
--   do local _ <close> = lab.autograd.detect_anomaly() ... end   -- on until closed
--   lab.autograd.set_detect_anomaly(true)                        -- on until set false
-- It costs a host copy of every output and gradient, and a traceback per node: a tool for
-- finding the first NaN, not for training runs (off, the engine tests one flag per node).
local errors = require("lab.errors")
local M = lab.autograd

local depth = 0
local paths = setmetatable({}, { __mode = "k" }) -- root module -> {module -> dotted name}

-- the dotted name of m inside root ("blocks.2.attn"), computed once per root
local function path_of(root, m)
  local map = paths[root]
  if not map then
    map = setmetatable({}, { __mode = "k" })
    local function walk(mod, prefix)
      if map[mod] then return end
      map[mod] = prefix
      for _, n in ipairs(mod._names) do
        if mod._kinds[n] == "module" then walk(mod[n], prefix == "" and n or prefix .. "." .. n) end
      end
    end
    walk(root, "")
    paths[root] = map
  end
  return map[m]
end

-- where the op now recording a node runs: called by the engine (through l_debug.c)
local function where(op)
  local stack = lab.nn.module_stack()
  local mod = "no module (outside any lab.nn module's forward)"
  if #stack > 0 then
    local root, inner = stack[1], stack[#stack]
    local p = path_of(root, inner)
    local cls = getmetatable(inner).__name or "Module"
    mod = string.format("module %s (%s)", (p == nil or p == "") and "<root " .. cls .. ">" or p, cls)
  end
  -- level 2: the op's C function, then the Lua line that called it
  -- (paths from lab/, which is where the library's files sit under the install's lua/)
  return mod .. "\n" .. debug.traceback("  forward traceback:", 2):gsub("[^%s]*/lua/lab/", "lab/")
end

local function set(on)
  if on then
    depth = depth + 1
    if depth == 1 then
      lab.nn._track_modules(true)
      M._set_anomaly(where)
    end
  elseif depth > 0 then
    depth = depth - 1
    if depth == 0 then
      M._set_anomaly(nil)
      lab.nn._track_modules(false)
    end
  end
end

function M.set_detect_anomaly(on)
  errors.arg(type(on) == "boolean", "lab.autograd.set_detect_anomaly", 1, "true or false", on)
  if on ~= M.is_anomaly_enabled() then set(on) end
end

function M.is_anomaly_enabled() return depth > 0 end

-- detect_anomaly(fn, ...) runs fn with anomaly mode on and returns its results;
-- detect_anomaly() turns it on and returns a guard that turns it off when closed
function M.detect_anomaly(fn, ...)
  errors.arg(fn == nil or type(fn) == "function", "lab.autograd.detect_anomaly", 1, "a function or nothing", fn)
  set(true)
  if fn then
    local r = table.pack(pcall(fn, ...))
    set(false)
    if not r[1] then error(r[2], 0) end
    return table.unpack(r, 2, r.n)
  end
  local closed = false
  local guard = {}
  function guard.close()
    if not closed then
      closed = true
      set(false)
    end
  end
  return setmetatable(guard, { __close = guard.close })
end

return M
