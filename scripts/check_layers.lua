-- The layer check: reads the #include "..." lines of the sources and reports
--   1. cycles between modules inside runtime/ (a module is a path without its extension:
--      runtime/tensor.c and runtime/tensor.h are one module), as strongly connected groups;
--   2. runtime headers other than runtime/lab.h included from lua/ or shell/ (lab.h is the
--      runtime's public face, as lua.h is Lua's; shell/ may also include runtime/lab_control.h,
--      the control plane it drives), and kernels/ headers included from lua/ or shell/;
--   3. includes that go up a layer (kernels -> runtime, runtime -> lua or shell, lua -> shell).
-- A finding fails the check unless it is listed in KNOWN below (what is left to untangle, see
-- docs/DESIGN.md); a KNOWN entry that no longer occurs fails too, so the list only shrinks.
-- Run it (CI runs it as the ctest `layers`):
--   build/llmlab scripts/check_layers.lua [source-root]
-- Plain Lua: io.popen of find, no MPI or tensors used.

local root = arg and arg[1] or "."

-- What remains, each entry the exact finding text. Remove an entry when its finding is gone.
local KNOWN = {
  -- none: the tensor core, dist/ and the control plane are free of include cycles, and lua/
  -- and shell/ reach the runtime through lab.h (and lab_control.h) only
}

local function list_files(dirs)
  local files = {}
  for _, d in ipairs(dirs) do
    local p = io.popen('cd "' .. root .. '" && find ' .. d .. ' -name "*.[ch]" 2>/dev/null | sort')
    for f in p:lines() do files[#files + 1] = f end
    p:close()
  end
  return files
end

local function exists(rel)
  local f = io.open(root .. "/" .. rel, "r")
  if f then f:close() return true end
  return false
end

-- a/b/../c -> a/c, ./x -> x
local function normalize(path)
  local out = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." and #out > 0 and out[#out] ~= ".." then
      out[#out] = nil
    elseif part ~= "." then
      out[#out + 1] = part
    end
  end
  return table.concat(out, "/")
end

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end
local function module_of(path) return (path:gsub("%.[ch]$", "")) end
local function layer_of(path) return path:match("^([^/]+)/") end

-- The include as the compiler finds it: next to the including file first, then from the root
-- (CMake puts the source root on the include path).
local function resolve(file, inc)
  local local_path = normalize(dirname(file) .. "/" .. inc)
  if exists(local_path) then return local_path end
  local from_root = normalize(inc)
  if exists(from_root) then return from_root end
  return nil -- a system or generated header
end

local files = list_files({ "kernels", "runtime", "lua", "shell" })
local findings = {}
local function report(text) findings[#findings + 1] = text end

local rank = { kernels = 1, runtime = 2, lua = 3, shell = 4 }
local edges, modules = {}, {}
for _, f in ipairs(files) do
  local m = module_of(f)
  if f:match("^runtime/") then modules[m] = true end
  local h = assert(io.open(root .. "/" .. f, "r"))
  for line in h:lines() do
    local inc = line:match('^%s*#%s*include%s+"([^"]+)"')
    local target = inc and resolve(f, inc)
    if target then
      local from, to = layer_of(f), layer_of(target)
      if rank[from] and rank[to] and rank[to] > rank[from] then
        report(string.format("upward include: %s includes %s", f, target))
      end
      local public = target == "runtime/lab.h" or (from == "shell" and target == "runtime/lab_control.h")
      if (from == "lua" or from == "shell") and to == "runtime" and not public then
        report(string.format("private runtime header: %s includes %s", f, target))
      end
      -- kernels/ is the runtime's own business: lua/ and shell/ reach its facts through lab.h
      if (from == "lua" or from == "shell") and to == "kernels" then
        report(string.format("kernel header above the runtime: %s includes %s", f, target))
      end
      if from == "runtime" and to == "runtime" then
        local n = module_of(target)
        if n ~= m then
          edges[m] = edges[m] or {}
          edges[m][n] = true
        end
      end
    end
  end
  h:close()
end

-- Tarjan's strongly connected components; each one of two or more modules is a cycle.
local index, low, on_stack, stack, counter = {}, {}, {}, {}, 0
local sorted_modules = {}
for m in pairs(modules) do sorted_modules[#sorted_modules + 1] = m end
table.sort(sorted_modules)
local function sorted_keys(t)
  local keys = {}
  for k in pairs(t or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end
local function connect(v)
  counter = counter + 1
  index[v], low[v] = counter, counter
  stack[#stack + 1] = v
  on_stack[v] = true
  for _, w in ipairs(sorted_keys(edges[v])) do
    if not index[w] then
      connect(w)
      low[v] = math.min(low[v], low[w])
    elseif on_stack[w] then
      low[v] = math.min(low[v], index[w])
    end
  end
  if low[v] == index[v] then
    local group = {}
    repeat
      local w = table.remove(stack)
      on_stack[w] = nil
      group[#group + 1] = w
    until w == v
    if #group > 1 then
      table.sort(group)
      report("cycle: " .. table.concat(group, " "))
      for _, a in ipairs(group) do
        local inside = {}
        for _, b in ipairs(sorted_keys(edges[a])) do
          for _, g in ipairs(group) do if g == b then inside[#inside + 1] = b end end
        end
        print(string.format("  %s -> %s", a, table.concat(inside, " ")))
      end
    end
  end
end
for _, m in ipairs(sorted_modules) do
  if not index[m] then connect(m) end
end

local known, seen, failed = {}, {}, false
for _, k in ipairs(KNOWN) do known[k] = true end
for _, text in ipairs(findings) do
  seen[text] = true
  if known[text] then
    print("known (left to do): " .. text)
  else
    print("NEW: " .. text)
    failed = true
  end
end
for _, k in ipairs(KNOWN) do
  if not seen[k] then
    print("FIXED but still listed in KNOWN (remove it): " .. k)
    failed = true
  end
end
print(string.format("layers: %d modules in runtime/, %d files read, %d findings, %s", #sorted_modules,
  #files, #findings, failed and "FAILED" or "ok"))
if failed then os.exit(1) end
