-- lab.prof: named, nestable sections timed with a monotonic clock, per rank. Each section
-- also records how much of its time was spent inside collectives (lab.dist.comm_time), so
-- compute and communication are reported apart. report() aggregates every rank's totals
-- (min / median / max over ranks); trace(path) writes Chrome trace JSON with one track per
-- rank (open it in chrome://tracing or Perfetto); report() also draws a per-rank timeline of
-- the innermost sections and their communication (lab.plot.timeline). Each section also keeps this rank's CPU time
-- outside collectives ("busy"): with more ranks than cores the wall times count the turns a
-- rank waited for a core, and report() then shows busy time instead of a communication share.
--   lab.prof.section("attention", function() ... end)
--   local s <close> = lab.prof.scope("ffn")     -- ends at the end of the block
local errors = require("lab.errors")
local prof = { enabled = true }
local stack, totals, order, events = {}, {}, {}, {}
local t_origin = lab.clock()

local function path_of(name)
  local parts = {}
  for i, s in ipairs(stack) do parts[i] = s.name end
  parts[#parts + 1] = name
  return table.concat(parts, "/")
end

function prof.start(name)
  errors.arg(type(name) == "string" and name ~= "" and not name:find("/", 1, true), "lab.prof.start", 1,
    "a section name (a non-empty string without /)", name)
  if not prof.enabled then return end
  local path = path_of(name)
  if #stack > 0 then stack[#stack].has_child = true end -- the parent is no innermost section
  if not totals[path] then -- rows keep the order sections first started in
    totals[path] = { time = 0, comm = 0, busy = 0, count = 0, depth = #stack }
    order[#order + 1] = path
  end
  stack[#stack + 1] = { name = name, path = path, t0 = lab.clock(), c0 = lab.dist.comm_time(),
    cpu0 = lab.dist.cpu_time(), ccpu0 = lab.dist.comm_cpu_time() }
end

function prof.stop()
  if not prof.enabled then return end
  local s = table.remove(stack)
  if not s then errors.raise("lab.prof.stop", "no section is open") end
  local t1, c1 = lab.clock(), lab.dist.comm_time()
  local tot = totals[s.path]
  tot.time = tot.time + (t1 - s.t0)
  tot.comm = tot.comm + (c1 - s.c0)
  tot.busy = tot.busy + (lab.dist.cpu_time() - s.cpu0) - (lab.dist.comm_cpu_time() - s.ccpu0)
  tot.count = tot.count + 1
  if #events < 100000 then
    events[#events + 1] = { name = s.name, ts = (s.t0 - t_origin) * 1e6, dur = (t1 - s.t0) * 1e6, comm = (c1 - s.c0) * 1e6,
      t0 = s.t0, leaf = not s.has_child }
  end
end

function prof.section(name, fn, ...)
  errors.type("lab.prof.section", 2, fn, "function")
  prof.start(name)
  local res = table.pack(pcall(fn, ...))
  prof.stop()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

function prof.scope(name)
  prof.start(name)
  return setmetatable({}, { __close = function() prof.stop() end })
end

function prof.reset()
  stack, totals, order, events = {}, {}, {}, {}
  t_origin = lab.clock()
end

-- The kernel profiler (runtime/kprof.c): kernels(true) times every cpu kernel from now on,
-- booked by category (gemm, attention, norm, activation, elementwise, embedding, loss,
-- optimizer); kernels(false) turns it off. Either resets the totals, and the SIMT
-- interpreter's per-kernel records (lab.sim) where the build has it.
function prof.kernels(on)
  lab._kprof(on ~= false)
  if lab.sim.available then lab.sim.reset() end
end

-- {category = {calls=, wall=, cpu=}} since kernels(true): wall and process CPU seconds. What a
-- step spends outside these (autograd bookkeeping, allocation, Lua) is its time minus their sum.
function prof.kernel_totals() return lab._kprof_totals() end

-- This rank's kernel table since kernels(true): the cpu kernels' categories (calls, wall and
-- CPU ms), and, when the default device is the sim and the build has the SIMT interpreter,
-- one row per interpreted kernel instantiation of kernels/cuda: launches, the last launch's
-- grid and block, its dynamic shared bytes, the blocks run and the hazards racecheck,
-- synccheck and memcheck found (a hazard also fails its op). Prints unless opts.print is
-- false; returns {categories = kernel_totals(), sim = lab.sim.stats() or nil}.
local function dim(d)
  return d[3] > 1 and string.format("%dx%dx%d", d[1], d[2], d[3]) or d[2] > 1 and string.format("%dx%d", d[1], d[2])
      or tostring(d[1])
end

function prof.kernel_table(opts)
  errors.opts("lab.prof.kernel_table", 1, opts)
  opts = opts or {}
  local cats = prof.kernel_totals()
  local on_sim = lab.default_device():match("^sim") ~= nil
  local sim = on_sim and lab.sim.available and lab.sim.stats() or nil
  if opts.print ~= false then
    local names = {}
    for name, t in pairs(cats) do if t.calls > 0 then names[#names + 1] = name end end
    table.sort(names)
    if #names > 0 then
      print(string.format("%-14s %8s %10s %10s", "cpu kernels", "calls", "wall ms", "cpu ms"))
      for _, name in ipairs(names) do
        local t = cats[name]
        print(string.format("%-14s %8d %10.2f %10.2f", name, t.calls, t.wall * 1e3, t.cpu * 1e3))
      end
    end
    if sim then
      print(string.format("%-40s %8s %8s %7s %8s %8s %7s", "interpreted kernel (sim)", "launches", "grid", "block",
        "shared B", "blocks", "hazards"))
      for _, k in ipairs(sim) do
        print(string.format("%-40s %8d %8s %7s %8d %8d %7d", k.kernel, k.launches, dim(k.grid), dim(k.block),
          k.shared_bytes, k.blocks, k.hazards))
      end
      if #sim == 0 then print("(no kernel ran interpreted since lab.prof.kernels(true); with LLMLAB_SIMT=0 the sim runs the cpu kernels)") end
    elseif on_sim then
      print("(this build has no SIMT interpreter: the sim device ran the cpu kernels, so there is no interpreted kernel to list)")
    end
  end
  return { categories = cats, sim = sim }
end

-- {path = {time=, comm=, busy=, count=}} of this rank (seconds)
function prof.totals() return totals end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

-- The per-rank timeline under report()'s table: the last TIMELINE_EVENTS innermost sections
-- of every rank on one clock (lab.clock is the host's monotonic clock: ranks on one host
-- share it), each drawn as its compute then its communication. Where in a section its
-- collectives ran is not recorded, only how long: the communication is drawn at its end.
local TIMELINE_EVENTS = 400

local function timeline(group, o)
  local lines, first = {}, math.max(1, #events - TIMELINE_EVENTS * 4)
  for i = first, #events do
    local e = events[i]
    if e.leaf then lines[#lines + 1] = string.format("%s\t%.9f\t%.9f\t%.9f", e.name:gsub("[\t\n]", " "), e.t0, e.dur / 1e6, e.comm / 1e6) end
  end
  while #lines > TIMELINE_EVENTS do table.remove(lines, 1) end
  local all = lab.dist.gather_strings(table.concat(lines, "\n"), group)
  if lab.dist.rank() ~= 0 then return end
  local origin, rows, any = math.huge, {}, false
  for _, text in ipairs(all) do
    for t0 in text:gmatch("[^\n]-\t(%S+)\t") do origin = math.min(origin, tonumber(t0)) end
  end
  for r, text in ipairs(all) do
    local spans = {}
    for name, t0, dur, comm in text:gmatch("([^\n]-)\t(%S+)\t(%S+)\t(%S+)") do
      local a = (tonumber(t0) - origin) * 1e3
      local b, c = a + tonumber(dur) * 1e3, tonumber(comm) * 1e3
      spans[#spans + 1] = { start = a, finish = b - c, label = name, kind = name }
      if c > 0 then spans[#spans + 1] = { start = b - c, finish = b, kind = "communication" } end
      any = true
    end
    rows[r] = { name = "rank " .. (r - 1), spans = spans }
  end
  if not any then return end
  lab.plot.timeline(rows, { title = "innermost sections per rank (ms); a section's communication drawn at its end",
    xlabel = "ms since the first section", svg = o.svg, width = o.width })
end

-- Every rank sends its totals; rank 0 prints one row per section: time and communication
-- in ms, min / median / max over ranks, and the communication share. When some node runs
-- more ranks than it has cores, the share would mostly measure waiting for a core: the rows
-- show each rank's busy time (CPU time outside collectives) instead. Then the per-rank
-- timeline (opts: timeline=false leaves it out, svg= writes it as SVG, width=). Returns the rows.
function prof.report(group, opts)
  errors.group("lab.prof.report", 1, group)
  errors.opts("lab.prof.report", 2, opts)
  opts = opts or {}
  local lines = {}
  for _, path in ipairs(order) do
    local t = totals[path]
    lines[#lines + 1] = string.format("%s\t%.9f\t%.9f\t%.9f\t%d\t%d", path, t.time, t.comm, t.busy, t.count, t.depth)
  end
  local over, ranks, cores = lab.dist.oversubscribed(group)
  local all = lab.dist.gather_strings(table.concat(lines, "\n"), group)
  local rows, paths, seen = {}, {}, {}
  for _, text in ipairs(all) do
    for line in text:gmatch("[^\n]+") do
      local path, time, comm, busy, count, depth = line:match("^(.-)\t(%S+)\t(%S+)\t(%S+)\t(%d+)\t(%d+)$")
      if path then
        if not seen[path] then
          seen[path] = true
          paths[#paths + 1] = path
          rows[path] = { times = {}, comms = {}, busys = {}, count = tonumber(count), depth = tonumber(depth) }
        end
        table.insert(rows[path].times, tonumber(time))
        table.insert(rows[path].comms, tonumber(comm))
        table.insert(rows[path].busys, tonumber(busy))
      end
    end
  end
  local function mmm(xs) -- "min/med/max" in ms
    return string.format("%8.2f/%8.2f/%8.2f", math.min(table.unpack(xs)) * 1e3, median({ table.unpack(xs) }) * 1e3,
      math.max(table.unpack(xs)) * 1e3)
  end
  if lab.dist.rank() == 0 then
    if over then
      print(string.format("(%d ranks share %d cores on a node: a wall time counts the turns a rank waited for a core,", ranks,
        cores))
      print(" and time in a collective is mostly waiting for ranks that were not running. Busy = CPU time")
      print(" outside collectives, the work each rank did; no communication share is shown.)")
      print(string.format("%-34s %6s %26s %26s", "section", "calls", "wall ms (min/med/max)", "busy ms (min/med/max)"))
    else
      local load = lab.load_average()
      if load > lab.cores() then
        print(string.format("(this machine's load average is %.1f on %d cores: other work shares the cores, so wall", load,
          lab.cores()))
        print(" and communication times include waiting for a core)")
      end
      print(string.format("%-34s %6s %26s %26s %6s", "section", "calls", "time ms (min/med/max)", "comm ms (min/med/max)", "comm%"))
    end
    for _, path in ipairs(paths) do
      local r = rows[path]
      local name = string.rep("  ", r.depth) .. path:match("[^/]+$")
      if over then
        print(string.format("%-34s %6d %s %s", name, r.count, mmm(r.times), mmm(r.busys)))
      else
        local tmed, cmed = median({ table.unpack(r.times) }), median({ table.unpack(r.comms) })
        print(string.format("%-34s %6d %s %s %5.1f%%", name, r.count, mmm(r.times), mmm(r.comms),
          tmed > 0 and 100 * cmed / tmed or 0))
      end
    end
  end
  if opts.timeline ~= false then timeline(group, opts) end
  rows.oversubscribed = over
  return rows
end

-- Chrome trace JSON on rank 0: one complete ("X") event per section, tid = rank, with the
-- section's communication time in args.
function prof.trace(path, group)
  errors.type("lab.prof.trace", 1, path, "string", "a file name")
  local parts = {}
  local r = lab.dist.rank()
  for _, e in ipairs(events) do
    parts[#parts + 1] = string.format('{"name":%q,"ph":"X","ts":%.3f,"dur":%.3f,"pid":0,"tid":%d,"args":{"comm_us":%.3f}}',
      e.name, e.ts, e.dur, r, e.comm)
  end
  local all = lab.dist.gather_strings(table.concat(parts, ","), group)
  if r == 0 then
    local f, ferr = io.open(path, "w")
    if not f then errors.raise("lab.prof.trace", "cannot write %s", tostring(ferr)) end
    local chunks = {}
    for rank, s in ipairs(all) do
      chunks[#chunks + 1] = string.format('{"name":"thread_name","ph":"M","pid":0,"tid":%d,"args":{"name":"rank %d"}}', rank - 1, rank - 1)
      if #s > 0 then chunks[#chunks + 1] = s end
    end
    f:write('{"traceEvents":[', table.concat(chunks, ","), "]}\n")
    f:close()
  end
end

return prof
