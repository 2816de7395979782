-- The REPL's IPython-style commands, run on every targeted rank: `:time expr` and
-- `:timeit expr` (each rank times the code, the ranks' times are gathered so every rank
-- prints the same min / median / max line, which the REPL shows once), and `:tb` (the
-- traceback of this rank's last error, which the shell keeps in the registry).
local M = {}

local function fmt(s)
  if s < 1e-6 then return string.format("%.0f ns", s * 1e9) end
  if s < 1e-3 then return string.format("%.1f us", s * 1e6) end
  if s < 1 then return string.format("%.2f ms", s * 1e3) end
  return string.format("%.3f s", s)
end

-- the code as a function: an expression when it reads as one (its value is returned), else
-- statements, as the prompt reads them
local function compile(code, cmd)
  local f = load("return " .. code, "=stdin")
  if not f then
    local err
    f, err = load(code, "=stdin")
    if not f then error(string.format("rank %d: %s: %s", lab.dist.rank(), cmd, err), 0) end
  end
  return f
end

-- every rank's number, in rank order, on every rank of the chunk's group
local function gather(x)
  local all = lab.dist.all_gather(lab.tensor({ x }, { dtype = "f64" }))
  local out = {}
  for i, t in ipairs(all) do out[i] = t[1] end
  return out
end

local function spread(times)
  local s = {}
  for i, t in ipairs(times) do s[i] = t end
  table.sort(s)
  local n = #s
  local median = n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
  return string.format("min %s, median %s, max %s over %d rank%s", fmt(s[1]), fmt(median), fmt(s[n]), n,
    n == 1 and "" or "s")
end

local function pack(...) return { n = select("#", ...), ... } end

-- :time code: runs it once; prints its value (as the prompt would) and the ranks' wall times
function M.time(code)
  local f = compile(code, ":time")
  local t0 = lab.clock()
  local r = pack(f())
  local dt = lab.clock() - t0
  if r.n > 0 then
    _G._ = r[1]
    print(table.unpack(r, 1, r.n))
  end
  print("time: " .. spread(gather(dt)))
end

-- :timeit code: as IPython's %timeit, enough runs for 0.2 s and the best of 3 such loops; the
-- number of runs is agreed by every rank (from the slowest first run), so code with
-- collectives runs them the same number of times everywhere
function M.timeit(code)
  local f = compile(code, ":timeit")
  local t0 = lab.clock()
  f()
  local first = lab.clock() - t0
  local slowest = 0
  for _, t in ipairs(gather(first)) do slowest = math.max(slowest, t) end
  local n = math.max(1, math.min(10000, math.floor(0.2 / math.max(slowest, 1e-9))))
  local best = math.huge
  for _ = 1, 3 do
    local s = lab.clock()
    for _ = 1, n do f() end
    best = math.min(best, (lab.clock() - s) / n)
  end
  print(string.format("timeit: %s per run (best of 3 loops of %d run%s)", spread(gather(best)), n,
    n == 1 and "" or "s"))
end

-- :tb: this rank's last error with its traceback
function M.tb()
  local tb = debug.getregistry()["lab.last_traceback"]
  print(tb or "no error on this rank in the last chunk")
end

return M
