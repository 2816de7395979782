-- Lab 13: pipeline parallelism, GPipe against 1F1B and interleaved 1F1B.
--
-- What it shows: an MLP's layers cut into one stage per rank, a batch cut into m
-- micro-batches that flow through the stages (activations forward by send/recv, their
-- gradients backward). Both schedules compute exactly what one rank computes with the
-- whole batch (checked); they differ in what they hold and when stages idle:
--   GPipe runs all m forwards, then all m backwards: each stage holds m micro-batches'
--   activations. 1F1B (PipeDream-Flush, used by Megatron-LM) starts backwards as soon as
--   the last stage can: stage s holds at most p - s.
--   Interleaved 1F1B (Megatron-LM's virtual stages) gives each rank v = 2 smaller model chunks,
--   so a micro-batch passes every rank twice in half-size steps and the fill and drain shrink.
--   Either way a stage idles while the pipeline fills and drains: the bubble is
--   (p - 1) / (m + p - 1) of the step (interleaved: (p - 1) / (v m + p - 1)), so m must be
--   large against p. Section 4 draws each schedule as a timeline, a row per stage, from the
--   order each rank runs its work in (pipe:order()), with forward = 1 and backward = 2 time
--   units, and checks its idle share against the formula. Section 3 measures
--   it where each rank has a core; with more ranks than cores it shows each stage's busy
--   time (CPU time outside send/recv) instead, since the stages then take turns.
--   scripts/llmlab -n 4 scripts/labs/13_pipeline.lua
local dist = lab.dist
local s, p = dist.rank(), dist.world()
local check, finish = lab.checker(64)
lab.print0(string.format("== Lab 13: pipeline parallelism over %d stages ==", p))

local W, B, LAYERS = 64, 32, 8
local function layers()
  lab.manual_seed(21)
  local ls = {}
  for _ = 1, LAYERS do
    ls[#ls + 1] = lab.nn.Linear(W, W, { dtype = "f64" })
    ls[#ls + 1] = lab.nn.GELU()
  end
  return ls
end
lab.manual_seed(5)
local X, Y = lab.randn(B, W, { dtype = "f64" }), lab.randn(B, W, { dtype = "f64" })
local function mse(y, t) return ((y - t) ^ 2):mean() end

-- 1. The same numbers as one rank, for both schedules
lab.print0(string.format("\n1. %d Linear+GELU layers, %d per stage, batch %d in 8 micro-batches, 3 SGD steps:",
  LAYERS, LAYERS // p, B))
local function reference(x, y)
  local ref = lab.nn.Sequential(layers())
  local ropt = lab.optim.SGD(ref:parameters(), { lr = 0.05 })
  local losses = {}
  for k = 1, 3 do
    ropt:zero_grad()
    local l = mse(ref(x), y)
    l:backward()
    ropt:step()
    losses[k] = l:item()
  end
  return losses
end
-- interleaved: 2 chunks per rank (global stage c*p + s), m = 2p micro-batches (a multiple of
-- p, as Megatron requires) of the first 24 rows
local V, XI, YI = 2, X:narrow(1, 1, 24), Y:narrow(1, 1, 24)
local function pipeline_of(schedule, m)
  local stage
  if schedule == "interleaved" then
    local parts = lab.pp.partition(layers(), V * p)
    stage = {}
    for c = 0, V - 1 do stage[c + 1] = parts[c * p + s + 1] end
  else
    stage = lab.pp.partition(layers(), p)[s + 1]
  end
  return lab.pp.Pipeline(stage, { micro_batches = m, schedule = schedule, loss = mse,
    activation_shape = function(mb) return { mb, W } end })
end
local pipes = {}
for _, schedule in ipairs({ "gpipe", "1f1b", "interleaved" }) do
  local interleaved = schedule == "interleaved"
  local x, y = interleaved and XI or X, interleaved and YI or Y
  local ref_losses = reference(x, y)
  local pipe = pipeline_of(schedule, interleaved and 2 * p or 8)
  local opt = lab.optim.SGD(pipe:parameters(), { lr = 0.05 })
  local worst = 0
  for k = 1, 3 do
    opt:zero_grad()
    local l = pipe:train_step(x, y)
    opt:step()
    worst = math.max(worst, math.abs(l - ref_losses[k]))
  end
  pipes[schedule] = pipe
  lab.print0(string.format("   %-11s losses %.10f %.10f %.10f ... largest |pipeline - one rank| %.1e", schedule,
    ref_losses[1], ref_losses[2], ref_losses[3], worst))
  check(schedule .. " equals one rank with the whole batch (1e-10)", worst < 1e-10)
end
lab.print0(string.format("   (interleaved: %d chunks per rank, %d micro-batches of the first 24 rows)", V, 2 * p))

-- 2. What each stage holds: micro-batches in flight, measured
lab.print0(string.format("\n2. Micro-batches whose activations each stage held at once (m = 8; interleaved m = %d, per chunk):",
  2 * p))
local held = {}
for _, schedule in ipairs({ "gpipe", "1f1b", "interleaved" }) do
  held[schedule] = lab.tensor({ pipes[schedule].max_in_flight }, { dtype = "f64" })
  local all = dist.all_gather(held[schedule])
  local parts = {}
  for r, t in ipairs(all) do parts[#parts + 1] = string.format("stage %d: %d", r - 1, t[1]) end
  lab.print0(string.format("   %-11s %s", schedule, table.concat(parts, "  ")))
end
check("GPipe holds all 8 on every stage", pipes.gpipe.max_in_flight == 8)
check("1F1B holds at most p - s on stage s", pipes["1f1b"].max_in_flight == math.min(p - s, 8))
check("interleaved holds what lab.pp.max_in_flight says", pipes.interleaved.max_in_flight ==
  lab.pp.max_in_flight("interleaved", p, s, 2 * p, V))

-- 3. The bubble: with a fixed micro-batch, a step of m micro-batches takes m + p - 1
-- micro-batch times instead of m, so the time per micro-batch falls towards the ideal
-- as m grows. Wider layers here so that compute, not call overhead, sets the time.
local W3, MB = 256, 16
local function wide_layers()
  lab.manual_seed(22)
  local ls = {}
  for _ = 1, LAYERS do ls[#ls + 1] = lab.nn.Linear(W3, W3) end
  return ls
end
local over, ranks_here, cores = dist.oversubscribed()
lab.print0(string.format("\n3. The bubble at p = %d: micro-batches of %d rows, %d-wide layers, 1F1B:", p, MB, W3))
if over then
  lab.print0(string.format("   %d ranks share %d cores here: stages take turns instead of running side by side, so", ranks_here,
    cores))
  lab.print0("   the wall time of a step and the bubble cannot be measured. What can: each stage's busy")
  lab.print0("   time, its CPU time outside send/recv (one thread per rank here).")
  lab.print0(string.format("   %4s %17s %21s %20s %24s", "m", "bubble (formula)", "busy ms/step (stages)", "busy ms/micro-batch",
    "(m+p-1) x busy/mb (formula)"))
else
  if lab.load_average() > cores then
    lab.print0(string.format("   (load average %.1f on %d cores: other work shares the cores, the times include waiting)",
      lab.load_average(), cores))
  end
  lab.print0(string.format("   %4s %17s %16s %22s", "m", "bubble (formula)", "ms per step", "ms per micro-batch"))
end
local stage = lab.pp.partition(wide_layers(), p)[s + 1]
local per_mb = {}
for _, m in ipairs({ 1, 2, 4, 8, 16 }) do
  lab.manual_seed(9)
  local x, y = lab.randn(m * MB, W3), lab.randn(m * MB, W3)
  local pipe = lab.pp.Pipeline(stage, { micro_batches = m, loss = mse, activation_shape = function(mb) return { mb, W3 } end })
  pipe:train_step(x, y) -- warm-up
  dist.barrier()
  local t0, cpu0, comm0 = lab.clock(), dist.cpu_time(), dist.comm_cpu_time()
  for _ = 1, 3 do pipe:train_step(x, y) end
  local busy = ((dist.cpu_time() - cpu0) - (dist.comm_cpu_time() - comm0)) / 3
  local t = lab.tensor({ (lab.clock() - t0) / 3 }, { dtype = "f64" })
  dist.all_reduce(t, { op = "max" })
  local b_lo, b_hi = lab.tensor({ busy }, { dtype = "f64" }), lab.tensor({ busy }, { dtype = "f64" })
  dist.all_reduce(b_lo, { op = "min" })
  dist.all_reduce(b_hi, { op = "max" })
  local bubble = (p - 1) / (m + p - 1)
  per_mb[m] = t[1] / m
  if over then
    lab.print0(string.format("   %4d %16.1f%% %10.2f .. %-8.2f %20.3f %24.2f", m, 100 * bubble, b_lo[1] * 1e3, b_hi[1] * 1e3,
      b_hi[1] / m * 1e3, (m + p - 1) * b_hi[1] / m * 1e3))
  else
    lab.print0(string.format("   %4d %16.1f%% %16.2f %22.3f", m, 100 * bubble, t[1] * 1e3, per_mb[m] * 1e3))
  end
end
if over then
  lab.print0("   each stage's busy time grows with m as its work does (m forwards and backwards); on one")
  lab.print0("   core per stage a step would last (m + p - 1) micro-batch times, the last column.")
else
  lab.print0(string.format("   wall per micro-batch, m = 16 against m = 1: %.2fx (the bubble alone predicts %.2fx)",
    per_mb[16] / per_mb[1], (16 + p - 1) / 16 / p))
end

-- 4. The schedules as timelines. Every rank's order of work (what train_step runs) goes to
-- rank 0, which replays it: a rank runs its list in order, a forward waits for the previous
-- global stage's forward of the micro-batch, a backward for the next stage's backward;
-- forward takes 1 unit, backward 2 (chunks of an interleaved rank: half that).
lab.print0(string.format("\n4. The schedules at p = %d, m = 8 (interleaved m = %d, v = %d), forward 1 unit, backward 2:", p,
  p * math.ceil(8 / p), V))
local function replay(orders, v)
  local done, free, at, rows = {}, {}, {}, {}
  for r = 1, p do free[r], at[r], rows[r] = 0, 1, { name = "stage " .. (r - 1), spans = {} } end
  local stages = v * p
  local left = 0
  for r = 1, p do left = left + #orders[r] end
  while left > 0 do
    local progress = false
    for r = 1, p do
      local op = orders[r][at[r]]
      if op then
        local kind, k, c = op[1], op[2], op[3]
        local gs = (c - 1) * p + (r - 1)
        local dep
        if kind == "F" then dep = gs > 0 and done["F" .. k .. ":" .. (gs - 1)] or (gs == 0 and 0)
        else dep = gs < stages - 1 and done["B" .. k .. ":" .. (gs + 1)] or (gs == stages - 1 and done["F" .. k .. ":" .. gs]) end
        if dep then
          local start = math.max(free[r], dep)
          local finish_ = start + (kind == "F" and 1 or 2) / v
          done[kind .. k .. ":" .. gs] = finish_
          free[r], at[r], left, progress = finish_, at[r] + 1, left - 1, true
          local sp = rows[r].spans
          sp[#sp + 1] = { start = start, finish = finish_, label = kind .. k, kind = kind == "F" and "forward" or "backward" }
        end
      end
    end
    if not progress then error("lab 13: the orders of work wait on each other (a schedule that deadlocks)", 0) end
  end
  local span = 0
  for r = 1, p do span = math.max(span, free[r]) end
  return rows, span
end
for _, schedule in ipairs({ "gpipe", "1f1b", "interleaved" }) do
  local v = schedule == "interleaved" and V or 1
  local m = schedule == "interleaved" and p * math.ceil(8 / p) or 8
  local order = pipeline_of(schedule, m):order()
  local parts = {}
  for i, op in ipairs(order) do parts[i] = table.concat(op, ",") end
  local all = dist.gather_strings(table.concat(parts, ";"))
  local bubble, formula = 0, (p - 1) / (v * m + p - 1)
  if s == 0 then
    local orders = {}
    for r, text in ipairs(all) do
      orders[r] = {}
      for kind, k, c in text:gmatch("(%a),(%d+),(%d+)") do orders[r][#orders[r] + 1] = { kind, tonumber(k), tonumber(c) } end
    end
    local rows, span = replay(orders, v)
    bubble = (span - 3 * m) / span -- every stage works 3m units (m forwards and m backwards per chunk set)
    lab.plot.timeline(rows, { title = string.format("%s: idle %.1f%% of the step (formula %.1f%%)", schedule, 100 * bubble,
      100 * formula), xlabel = "time (forward = 1)" })
  end
  local b = lab.tensor({ bubble }, { dtype = "f64" })
  dist.broadcast(b, 0)
  check(string.format("%s's idle share is (p-1)/(%sm+p-1)", schedule, v > 1 and "v" or ""), math.abs(b[1] - formula) < 1e-9)
end
finish("lab 13")
