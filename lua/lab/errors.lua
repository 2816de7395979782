-- Every error that reaches the user names the rank. lab's own errors start with "rank N: op:",
-- but errors raised by luaL_check* argument checks in C ("bad argument #1 to 'narrow' (number
-- expected, got string)") and raw Lua errors inside lua/lab/*.lua carry no rank, and on a
-- 4-rank job the rank is what tells whose mistake it was. They reach user code in three
-- places, which hand them back decorated: pcall, xpcall (its handler sees the decorated
-- message) and coroutine.resume. The user's own errors (error("stop")) are theirs and pass
-- unchanged, as do error objects; the shell's top-level report adds the rank to everything.
-- Also: errors.arg / errors.tensor, the argument checks of lua/lab's public functions, so a
-- wrong argument is "rank N: fname: bad argument #2 (a tensor expected, got number)" instead
-- of a raw "init.lua:45: attempt to index a number value".
local M = {}

local function rank()
  return (lab and lab.dist and lab.dist.rank) and lab.dist.rank() or 0
end

-- messages that come from argument checks, the Lua runtime outside user code, or lua/lab
local ours = { "bad argument #%-?%d+ to ", "^calling '[^']*' on bad self", "lua/lab/[%w_]+%.lua:%d+: ", "^attempt to " }

-- "rank N: " in front of such a message when it does not name a rank yet
function M.decorate(e)
  if type(e) ~= "string" or e:find("rank %d+: ") then return e end
  for _, p in ipairs(ours) do
    if e:find(p) then return "rank " .. rank() .. ": " .. e end
  end
  return e
end

local function failed(ok, ...)
  if ok then return ok, ... end
  return false, M.decorate((...))
end

-- raises "rank N: fname: bad argument #n (what expected, got <type>)" unless ok
function M.arg(ok, fname, n, what, value)
  if ok then return end
  local got = lab.is_tensor(value) and "a tensor" or type(value)
  if type(value) == "number" then got = tostring(value) end
  if lab.nn and lab.nn.is_module(value) then got = "a " .. tostring(getmetatable(value).__name or "lab.nn") .. " module" end
  error(string.format("rank %d: %s: bad argument #%d (%s expected, got %s)", rank(), fname, n, what, got), 0)
end

function M.tensor(fname, n, value) M.arg(lab.is_tensor(value), fname, n, "a tensor", value) end

-- the usual kinds of argument: an options table (or nil), a module, a positive integer, a
-- value of a Lua type
function M.opts(fname, n, value)
  M.arg(value == nil or type(value) == "table", fname, n, "an options table or nil", value)
end
function M.module(fname, n, value)
  M.arg(lab.nn.is_module(value), fname, n, "a lab.nn module", value)
end
function M.posint(fname, n, value, what)
  M.arg(math.type(value) == "integer" and value >= 1, fname, n, "a positive integer" .. (what and (" (" .. what .. ")") or ""), value)
end
-- a constructor's positive-integer sizes, as value, what pairs in argument order, then its
-- options table (the argument after them); returns the options, {} when none were passed
function M.sizes(fname, opts, ...)
  local n = select("#", ...) // 2
  for i = 1, n do
    local value, what = select(2 * i - 1, ...)
    M.posint(fname, i, value, what)
  end
  M.opts(fname, n + 1, opts)
  return opts or {}
end
-- a function's leading arguments, each checked by check (M.tensor, M.module), then its
-- options table; returns the options, {} when none were passed
function M.with_opts(fname, check, opts, ...)
  local n = select("#", ...)
  for i = 1, n do check(fname, i, (select(i, ...))) end
  M.opts(fname, n + 1, opts)
  return opts or {}
end
-- Adam's betas: {beta1, beta2}, each in [0, 1)
function M.betas(fname, n, value)
  local function beta(x) return type(x) == "number" and x >= 0 and x < 1 end
  M.arg(value == nil or (type(value) == "table" and beta(value[1]) and beta(value[2])),
    fname, n, "opts.betas = {beta1, beta2} with each in [0, 1)", value)
end
function M.type(fname, n, value, ty, what)
  M.arg(type(value) == ty, fname, n, what or ("a " .. ty), value)
end

function M.group(fname, n, value, what)
  local mt = getmetatable(value)
  M.arg(value == nil or (type(value) == "userdata" and type(mt) == "table" and rawget(mt, "__name") == "lab.dist.Group"),
    fname, n, (what or "a process group") .. " or nil", value)
end

-- raises "rank N: fname: <message>" (string.format(fmt, ...)): every error lua/lab raises
-- itself goes through here, so none reaches the user without the rank and the function
function M.raise(fname, fmt, ...)
  error(string.format("rank %d: %s: " .. fmt, rank(), fname, ...), 0)
end

-- A raw Lua error raised inside lua/lab/*.lua ("moe.lua:345: attempt to index a nil value
-- (local 'm')": usually an argument of the wrong type) leaves a public function as
-- "rank N: lab.moe.stats: moe.lua:345: ...", naming the function the user called; errors that
-- already name a rank, and error objects, pass unchanged.
local base_pcall = pcall
local function rethrow(name, ok, ...)
  if ok then return ... end
  local e = ...
  if type(e) == "string" and not e:find("rank %d+: ") and e:find("lua/lab/[%w_]+%.lua:%d+: ") then
    e = string.format("rank %d: %s: %s", rank(), name, e)
  end
  error(e, 0)
end

local function wrapped(name, f)
  return function(...) return rethrow(name, base_pcall(f, ...)) end
end

-- wraps every Lua function stored under a string key of t (not metamethods, not C functions)
function M.wrap(t, prefix)
  for k, f in pairs(t) do
    if type(k) == "string" and type(f) == "function" and not k:find("^_") and debug.getinfo(f, "S").what == "Lua" then
      t[k] = wrapped(prefix .. k, f)
    end
  end
end

-- replaces pcall, xpcall and coroutine.resume in the environment g (once)
function M.install(g)
  if g.__lab_errors_installed then return end
  g.__lab_errors_installed = true
  local base_pcall, base_xpcall, base_resume = g.pcall, g.xpcall, g.coroutine.resume
  g.pcall = function(f, ...) return failed(base_pcall(f, ...)) end
  g.xpcall = function(f, handler, ...)
    return base_xpcall(f, function(e) return handler(M.decorate(e)) end, ...)
  end
  g.coroutine.resume = function(co, ...) return failed(base_resume(co, ...)) end
end

return M
