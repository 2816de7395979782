-- help(f), `?f`, `f?`: the docstring of a public function of lab, as IPython's `?` and
-- Python's help() show one. The docstrings live beside their namespace, one table per
-- namespace in lua/lab/doc/<namespace>.lua (doc/core.lua for the functions directly in lab),
-- each entry "signature: one line". A function is found by walking lab, so what help shows
-- is the name the user can type, whatever variable holds the function.
local M = {}

-- a module class (lab.nn.Linear, lab.tp.ColumnParallelLinear): a table named by __name that is
-- called to construct an instance (lab.nn.class); its docstring is the constructor's
local function is_class(t)
  local mt = type(t) == "table" and getmetatable(t)
  return type(mt) == "table" and rawget(mt, "__call") ~= nil and type(rawget(t, "__name")) == "string"
end
M.is_class = is_class

-- The table of tensor methods (t:sum() is lab.Tensor.sum(t)): lab.Tensor looks them up there.
local function tensor_methods()
  local mt = type(lab.Tensor) == "table" and getmetatable(lab.Tensor)
  return type(mt) == "table" and type(rawget(mt, "__index")) == "table" and rawget(mt, "__index") or nil
end

-- a namespace to walk: a plain table, a callable module (lab.plan(o), lab.plot(v): a metatable
-- with __call and no __index), or lab.nn.Module, whose methods are public API; other tables
-- with a metatable are classes or objects
local function walkable(t, path)
  local mt = getmetatable(t)
  return mt == nil or (type(mt) == "table" and rawget(mt, "__call") ~= nil and rawget(mt, "__index") == nil) or
    path == "lab.nn.Module"
end

-- the table whose keys a namespace's walk lists: lab.Tensor's are the tensor methods
local function keys_of(t, path)
  if path == "lab.Tensor" then return tensor_methods() or {} end
  return t
end

-- Every public function reachable from lab, as { [function] = "lab.dist.all_reduce" }, and
-- the list of names in order: functions, each class's constructor (lab.nn.Linear) and each
-- tensor method (lab.Tensor.sum). Tables with a metatable are classes or objects (lab.nn.Module
-- is walked: its methods are public API; lab.Tensor: the tensor methods); names with a leading
-- '_' are private. A function under several names is named where lab holds it outside
-- lab.Tensor (t.matmul is lab.matmul).
function M.public_functions()
  local byfn, names, seen = {}, {}, {}
  local function walk(t, path, depth)
    if seen[t] or depth > 4 then return end
    seen[t] = true
    local keys, from = {}, keys_of(t, path)
    for k in pairs(from) do
      if type(k) == "string" and k:sub(1, 1) ~= "_" then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v, p = rawget(from, k), path .. "." .. k
      if type(v) == "function" then
        if not byfn[v] or (byfn[v]:find("^lab%.Tensor%.") and not p:find("^lab%.Tensor%.")) then byfn[v] = p end
        names[#names + 1] = p
      elseif is_class(v) then
        names[#names + 1] = p -- its constructor
      elseif type(v) == "table" and (walkable(v, p) or p == "lab.Tensor") then
        walk(v, p, depth + 1)
      end
    end
  end
  walk(lab, "lab", 0)
  return byfn, names
end

-- "lab.dist.all_reduce" -> the doc table of lab.dist and the key "all_reduce";
-- "lab.zeros" -> doc/core.lua and "zeros"; "lab.nn.Module.to" -> doc/nn.lua and "Module.to"
local function doc_of(path)
  local rest = path:match("^lab%.(.+)$")
  if not rest then return nil end
  local ns, key = rest:match("^([%w_]+)%.(.+)$")
  if not ns then ns, key = "core", rest end
  if ns == "Tensor" then ns = "tensor" end -- doc/tensor.lua: the tensor methods
  local ok, docs = pcall(require, "lab.doc." .. ns)
  if not ok or type(docs) ~= "table" then return nil end
  return docs[key]
end
M.doc_of = doc_of

-- the path of a value inside lab, or nil
local function path_of(v)
  if v == lab then return "lab" end
  local byfn = M.public_functions()
  if byfn[v] then return byfn[v] end
  if type(v) == "table" then
    local seen = {}
    local function find(t, path, depth)
      if seen[t] or depth > 4 then return nil end
      seen[t] = true
      for k, x in pairs(t) do
        if type(k) == "string" and k:sub(1, 1) ~= "_" and type(x) == "table" then
          if x == v then return path .. "." .. k end
          local p = walkable(x, path .. "." .. k) and find(x, path .. "." .. k, depth + 1)
          if p then return p end
        end
      end
    end
    return find(lab, "lab", 0)
  end
end

-- the lines help shows for a namespace: each function and the first line of its doc
local function namespace_lines(t, path)
  local lines, keys = { path .. ":" }, {}
  t = keys_of(t, path)
  for k, v in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and (type(v) == "function" or type(v) == "table") then
      keys[#keys + 1] = k
    end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = t[k]
    if type(v) == "function" or is_class(v) then
      local d = doc_of(path .. "." .. k)
      lines[#lines + 1] = "  " .. (d or (k .. "(...)  (no docstring)"))
    else
      lines[#lines + 1] = "  " .. k .. "  (namespace: help(" .. path .. "." .. k .. "))"
    end
  end
  return lines
end

-- what help shows for a class: its constructor's docstring, then its own methods and its parent
local function class_text(cls, path)
  local lines, own = { path, "  " .. (doc_of(path) or (path .. "(...)  (no docstring)")) }, {}
  for k, v in pairs(cls) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and k ~= "init" and type(v) == "function" then own[#own + 1] = k end
  end
  table.sort(own)
  if #own > 0 then lines[#lines + 1] = "  methods: " .. table.concat(own, ", ") end
  local mt = getmetatable(cls)
  local parent = type(mt) == "table" and rawget(mt, "__index")
  local ppath = type(parent) == "table" and path_of(parent)
  if ppath then lines[#lines + 1] = "  and those of " .. ppath .. " (help(" .. ppath .. "))" end
  return table.concat(lines, "\n")
end

-- The text help shows for v (a function, a namespace of lab, or a name such as
-- "lab.dist.all_reduce"); `what` is how the user wrote it, for the messages.
function M.text(v, what)
  if type(what) ~= "string" then what = tostring(v) end -- (help(x, anything else): as help(x))
  if type(v) == "string" and v:match("^lab[%w_.]*$") then
    local t = lab
    for part in v:gmatch("[^.]+") do
      if part ~= "lab" then t = type(t) == "table" and rawget(t, part) or nil end
    end
    if t == nil then return "help: " .. v .. " is not a name in lab (Tab completes lab.<TAB>)" end
    what, v = v, t
  end
  if v == nil then
    return "help: " .. (what == "nil" and "the value given" or what) ..
      " is nil (a misspelt name? Tab completes names, e.g. lab.dist.<TAB>; help() lists the namespaces)"
  end
  local path = path_of(v)
  if path and is_class(v) then return class_text(v, path) end
  if type(v) == "function" then
    if not path then
      local info = debug.getinfo(v, "S")
      return string.format("%s: a function defined at %s:%d (not part of lab: no docstring)", what,
        info.short_src, info.linedefined)
    end
    local d = doc_of(path)
    return path .. "\n  " .. (d or "(no docstring)")
  end
  if type(v) == "table" and path then return table.concat(namespace_lines(v, path), "\n") end
  if v == nil or type(v) ~= "table" then
    return string.format("%s: a %s value, %s (help describes the functions of lab)", what, type(v), tostring(v))
  end
  return what .. ": a table that is not part of lab (help describes the functions of lab)"
end

function M.help(...)
  local v, what = ...
  if select("#", ...) == 0 then
    print("help(f) or ?f or f? shows the docstring of a function of lab (?t.sum: a tensor method, ?lab.nn.Linear: a\n" ..
      "class's constructor); help(lab.dist) lists a namespace.\n" ..
      "Namespaces: " .. table.concat((function()
        local ns = {}
        for k, x in pairs(lab) do
          if type(k) == "string" and k:sub(1, 1) ~= "_" and type(x) == "table" and (walkable(x, "lab." .. k) or k == "Tensor") then
            ns[#ns + 1] = "lab." .. k
          end
        end
        table.sort(ns)
        return ns
      end)(), ", ") .. "\nREPL commands: :help")
    return
  end
  print(M.text(v, what))
end

return M
