-- Pure-Lua helpers of the `lab` module, loaded once after the C parts are registered.
-- They read like what they do: print on one rank, compare tensors, format sizes.
local lab = lab
local errors = require("lab.errors")
errors.install(_G) -- pcall, xpcall and coroutine.resume hand back errors that name the rank
lab._errors = errors -- (private: the argument checks of lua/lab)
-- The namespaces written in Lua: lab.<name> = require("lab.<name>") for each name, in this
-- order (a module may use the ones loaded before it).
local function load(names)
  for _, name in ipairs(names) do lab[name] = require("lab." .. name) end
end
require("lab.autograd") -- gradcheck, into the C lab.autograd
load { "nn", "optim" }
require("lab.gpt") -- lab.nn.GPT and its blocks
load { "data", "train", "replicas", "ddp", "zero" }
require("lab.mem") -- report and estimate, into the C lab.mem
load { "prof" }
lab.dist.grid = require("lab.grid").new
load { "tp", "generate", "pp", "moe", "cp", "amp", "lora", "posttrain", "ckpt", "plan", "plan_presets", "netsim", "plot" }
require("lab.anomaly") -- detect_anomaly, into lab.autograd
load { "fault", "monitor" }
lab.help = require("lab.help").help -- help(f): the docstrings of lua/lab/doc/<namespace>.lua
-- the tensor methods by name, as torch.Tensor: lab.Tensor.sum(t) is t:sum(), help(lab.Tensor)
-- lists them (a view: the methods stay in the tensor's metatable, doc/tensor.lua)
lab.Tensor = setmetatable({}, { __index = lab._tensor_methods,
  __tostring = function() return "lab.Tensor (the tensor methods: help(lab.Tensor))" end })

-- print on rank 0 only (or on the given rank): lab scripts use it for their narrative
function lab.print0(...)
  if lab.dist.rank() == 0 then print(...) end
end

-- print on the given rank only, each value shown as the REPL shows it (tables by their contents,
-- compactly, keys sorted: lab._show, which the shell provides; tostring without it), in
-- scripts as at the prompt. lab.printr is the same function (its older name), made the same
-- again after errors.wrap below.
function lab.print_on(rank, ...)
  if lab.dist.rank() ~= rank then return end
  local show, n, out = lab._show or tostring, select("#", ...), {}
  for i = 1, n do out[i] = show((select(i, ...))) end
  print(table.unpack(out, 1, n))
end
lab.printr = lab.print_on

-- largest |a - b| as a Lua number
function lab.max_abs_diff(a, b)
  errors.arg(lab.is_tensor(a) or type(a) == "number", "max_abs_diff", 1, "a tensor or number", a)
  errors.arg(lab.is_tensor(b) == lab.is_tensor(a) and (lab.is_tensor(b) or type(b) == "number"), "max_abs_diff", 2,
    lab.is_tensor(a) and "a tensor" or "a number", b)
  if lab.is_tensor(a) and lab.is_tensor(b) then
    return (a:to('f64') - b:to('f64')):abs():max():item()
  end
  return math.abs(a - b)
end

-- |a - b| <= atol + rtol * |b| elementwise, as torch.allclose
function lab.allclose(a, b, rtol, atol, fname)
  fname = fname or "allclose"
  errors.tensor(fname, 1, a)
  errors.tensor(fname, 2, b)
  errors.arg(rtol == nil or type(rtol) == "number", fname, 3, "a number (rtol)", rtol)
  errors.arg(atol == nil or type(atol) == "number", fname, 4, "a number (atol)", atol)
  rtol, atol = rtol or 1e-5, atol or 1e-8
  local a64, b64 = a:to('f64'), b:to('f64')
  local bad = (a64 - b64):abs():gt(b64:abs() * rtol + atol)
  return bad:sum():item() == 0
end

-- raises a rank-prefixed error when a and b differ beyond tolerance
function lab.assert_close(a, b, rtol, atol, what)
  errors.arg(what == nil or type(what) == "string", "assert_close", 5, "a string (what)", what)
  if not lab.allclose(a, b, rtol, atol, "assert_close") then
    error(string.format("rank %d: %s: tensors differ (max |a-b| = %.3g)", lab.dist.rank(),
      what or "assert_close", lab.max_abs_diff(a, b)), 0)
  end
end

-- The checks a lab prints: lab.checker(width) returns check(what, ok) and finish(name).
-- A check fails when it fails on any rank (the verdicts are all-reduced, so every rank
-- agrees); finish raises if anything failed, so the lab's exit status tells.
function lab.checker(width)
  errors.arg(width == nil or math.type(width) == "integer", "checker", 1, "an integer (width)", width)
  local failures = 0
  local function check(what, ok)
    local bad = lab.tensor({ ok and 0 or 1 }, { dtype = "i32" })
    lab.dist.all_reduce(bad)
    if bad[1] > 0 then failures = failures + 1 end
    lab.print0(string.format("  %-" .. (width or 58) .. "s %s", what,
      bad[1] == 0 and "ok" or ("FAILED on " .. bad[1] .. " rank(s)")))
    return bad[1] == 0
  end
  local function finish(name)
    if failures > 0 then errors.raise(tostring(name), "%d check(s) failed", failures) end
    lab.print0("\nall checks passed")
  end
  return check, finish
end

-- "1.50 MiB" for byte counts
function lab.format_bytes(n)
  errors.arg(type(n) == "number", "format_bytes", 1, "a number", n)
  if n ~= n or n == math.huge or n == -math.huge then return tostring(n) .. " B" end -- (%d cannot print them)
  local units = { "B", "KiB", "MiB", "GiB", "TiB" }
  local i = 1
  while n >= 1024 and i < #units do n = n / 1024; i = i + 1 end
  if i == 1 and math.abs(n) >= 2 ^ 53 then return string.format("%.3g B", n) end -- (a negative beyond %d's reach)
  return i == 1 and string.format("%d B", math.floor(n + 0.5)) or string.format("%.2f %s", n, units[i])
end

-- Every rank's string, in rank order, on every rank: the strings travel as byte tensors
-- through all_gather (padded to the longest), which is all a collective can carry.
function lab.dist.gather_strings(s, group)
  errors.arg(type(s) == "string", "gather_strings", 1, "a string", s)
  local len = lab.tensor({ #s }, { dtype = "i64" })
  lab.dist.all_reduce(len, { op = "max", group = group })
  local n = len[1]
  local bytes = lab.zeros(math.max(n, 1), { dtype = "i32" })
  for i = 1, #s do bytes[i] = s:byte(i) end
  local all = lab.dist.all_gather(bytes, { group = group })
  local out = {}
  for r, t in ipairs(all) do
    local chars = {}
    for i, b in ipairs(t:tolist()) do
      if b == 0 then break end
      chars[i] = string.char(b)
    end
    out[r] = table.concat(chars)
  end
  return out
end

-- The CPUs this machine has online (/sys/devices/system/cpu/online, e.g. "0-1" or "0-3,8-11").
function lab.cores()
  local f = io.open("/sys/devices/system/cpu/online")
  local spec = f and f:read("l")
  if f then f:close() end
  local n = 0
  for lo, hi in (spec or ""):gmatch("(%d+)%-?(%d*)") do n = n + (hi ~= "" and tonumber(hi) - tonumber(lo) + 1 or 1) end
  return math.max(n, 1)
end

-- This machine's load average over the last minute (runnable processes, ours included).
function lab.load_average()
  local f = io.open("/proc/loadavg")
  local load = f and tonumber(f:read("n"))
  if f then f:close() end
  return load or 0
end

-- More ranks on this node than it has cores? Then ranks take turns on the cores, and a timing
-- measures the waiting for a core as much as the work: labs say so instead of reading ratios
-- from it. Every rank of the group gets the same answer (any node oversubscribed).
function lab.dist.oversubscribed(group)
  local over = lab.tensor({ lab.dist.local_world() > lab.cores() and 1 or 0 }, { dtype = "i32" })
  lab.dist.all_reduce(over, { op = "max", group = group })
  return over[1] == 1, lab.dist.local_world(), lab.cores()
end

-- rank 0 prints one line per rank, in rank order: "[r] text". In the REPL, whose output is
-- already labelled and grouped by rank, each rank of the group prints its own line instead.
function lab.dist.print_ranks(s, group)
  errors.arg(type(s) == "string", "print_ranks", 1, "a string", s)
  if lab.dist.output_labelled then
    if not group or group:rank() >= 0 then print(s) end
    return
  end
  local all = lab.dist.gather_strings(s, group)
  if lab.dist.rank() == 0 then
    for r, line in ipairs(all) do print(string.format("[%d] %s", r - 1, line)) end
  end
end

-- public Lua functions name themselves in raw Lua errors (lua/lab/errors.lua)
errors.wrap(lab, "lab.")
errors.wrap(lab.dist, "lab.dist.")
errors.wrap(lab.nn.Module, "Module:")
for _, m in ipairs({ "nn", "optim", "data", "train", "ddp", "zero", "prof", "tp", "pp", "moe", "cp", "amp", "lora",
  "posttrain", "ckpt", "mem", "plot" }) do
  if type(lab[m]) == "table" then errors.wrap(lab[m], "lab." .. m .. ".") end
end
lab.printr = lab.print_on -- one function (wrap made each name its own)

return lab
