-- lab.plan's validation that cannot fit itself: leave-one-source-out. The free parameters
-- (plan_presets.free: the fractions of peak per GPU generation and the constants of terms no
-- source gives) are set, for each source in turn, by minimising the mean absolute relative
-- error on the other sources' rows (plan_published.all); the error reported for the source's
-- own rows is then a prediction, not a fit. The fit must be cheap enough for a test to redo
-- it: each row's candidates are its planner's best few layouts at the start parameters
-- (the enumeration is too slow to run inside a search), each evaluated at a parameter
-- vector once (cached on the parameters that row depends on), and the search is a pattern
-- search to a tolerance: each parameter moved up or down by a step as long as that lowers
-- the objective, every parameter in turn until none does, then the step halved, from 10% of
-- each parameter's bounds while it is at least TOLERANCE (0.1%; the last step is 0.16%): it
-- ends at a point no single move of the last step improves. The left-out rows are then re-evaluated on the same shortlist at the fold's own
-- fitted parameters. A fold leaves out a whole stack (plan_published.stacks: sources that
-- share code and authors), not one source. F.fit(plan, entries) over every row gives the
-- defaults plan_presets.free carries. Every fit, and each row's shortlist, starts from
-- plan_presets.free's start values, which no fit chose, so nothing a fold sees was set by
-- the stack it predicts.
local presets = require("lab.plan_presets")
local published = require("lab.plan_published")
local F = {}

local CANDIDATES = 2 -- layouts per row the search re-evaluates
local FIRST_STEP, TOLERANCE = 0.1, 1e-3 -- the search's first and last step, as fractions of each parameter's bounds
local GPU_FIELDS = { gemm = true, gemm_fp8 = true, attention = true, memory = true }

local copy = require("lab.plan_check").copy

local function generation(run)
  local g = presets.gpus[run.gpu]
  return g and g.generation or "a100"
end

-- the indices of the free parameters a run depends on
local function relevant(run)
  local gen, fp8 = generation(run), (run.opts or {}).precision == "fp8"
  local out = {}
  for i, f in ipairs(presets.free) do
    local used = (f.name ~= "gemm_fp8" or fp8) and (f.name ~= "triton_hopper" or (run.opts or {}).attention_kernel == "triton")
    if used and (not f.generation or f.generation == gen) then out[#out + 1] = i end
  end
  return out
end

-- a run's plan options with the free parameters x (nil: their defaults) and a weak
-- assumption's alternative (key = value) applied
function F.options(run, x, key, value)
  local o = published.options(run)
  if key then o[key] = value end
  local gen = generation(run)
  for i, f in ipairs(presets.free) do
    local v = x and x[i] or f.default
    if GPU_FIELDS[f.name] then
      if not f.generation or f.generation == gen then o["gpu_" .. f.name] = v end
    else
      o[f.name] = v
    end
  end
  return o
end

-- the metric a run publishes, from a plan result
function F.metric(r, run)
  if run.metric == "tokens" then return r.tokens_per_s / run.gpus end
  if run.metric == "tflops" then return r.model_flops / (r.step_s * run.gpus) end
  return r[run.metric]
end

-- the full answer for a run at parameters x: best layout, figure
function F.predict(plan, run, x, key, value)
  local res = plan.enumerate(F.options(run, x, key, value))
  if not res[1] then return nil end
  return F.metric(res[1], run), res[1]
end

-- each run's shortlist: its best CANDIDATES layouts at the start values, the resolved model,
-- GPU and options, and the parameters it depends on
local function shortlists(plan, rows)
  local out = {}
  for _, run in ipairs(rows) do
    local res, _, m, gpu, q = plan.enumerate(F.options(run, F.start()))
    if res[1] then
      local cands = {}
      for i = 1, math.min(CANDIDATES, #res) do
        local r = res[i]
        cands[i] = { dp = r.dp, tp = r.tp, pp = r.pp, cp = r.cp, ep = r.ep, etp1 = r.etp1, zero = r.zero, mb = r.mb,
          recompute = r.recompute, v = r.v }
      end
      out[#out + 1] = { run = run, m = m, gpu = gpu, q = q, cands = cands, uses = relevant(run), cache = {} }
    end
  end
  return out
end

-- a shortlisted run's best result at parameters x, with a weak assumption's alternative
-- (key = value) when given
local function evaluate(plan, e, x, key, value)
  local gpu, o = copy(e.gpu), copy(e.q)
  if key then
    local field = key:match("^gpu_(.+)")
    if field then gpu[field] = value else o[key] = value end
  end
  local gen = e.gpu.generation
  for i, f in ipairs(presets.free) do
    if GPU_FIELDS[f.name] then
      if not f.generation or f.generation == gen then gpu[f.name] = x[i] end
    else
      o[f.name] = x[i]
    end
  end
  local best
  for _, c in ipairs(e.cands) do
    local r = plan.evaluate(e.m, gpu, o, c)
    if r.fits and (not best or r.step_s < best.step_s) then best = r end
  end
  return best
end

-- its absolute relative error at parameters x (cached on the parameters it uses)
local function quick(plan, e, x)
  local key = {}
  for j, i in ipairs(e.uses) do key[j] = x[i] end
  key = table.concat(key, ",")
  local hit = e.cache[key]
  if hit then return hit end
  local best = evaluate(plan, e, x)
  local err = best and math.abs(F.metric(best, e.run) - e.run.published) / e.run.published or 1
  e.cache[key] = err
  return err
end

local function objective(plan, entries, x)
  local sum = 0
  for _, e in ipairs(entries) do sum = sum + quick(plan, e, x) end
  return sum / math.max(#entries, 1)
end

F.objective = objective

-- the starting point of every fit (plan_presets.free's start: values no fit chose)
function F.start()
  local x = {}
  for i, f in ipairs(presets.free) do x[i] = f.start end
  return x
end

-- one coordinate move: parameter i by sign x `step` of its bounds (clamped to them);
-- returns the new point and its error if that lowers the objective, or nil
local function move(plan, entries, x, best, i, step, sign)
  local f = presets.free[i]
  local y = copy(x)
  y[i] = math.min(f.hi, math.max(f.lo, x[i] + sign * step * (f.hi - f.lo)))
  if y[i] == x[i] then return nil end
  local err = objective(plan, entries, y)
  if err < best - 1e-12 then return y, err end
end

-- The pattern search from the start: at each step size, every parameter in turn moves up
-- (or else down) for as long as each move lowers the mean absolute relative error, sweeps
-- repeating until no parameter moves; then the step halves, down to TOLERANCE. Deterministic
-- (a fixed order, strict improvement). Returns x, the error and the objective evaluations.
function F.fit(plan, entries)
  local x = F.start()
  local best = objective(plan, entries, x)
  local evals, step = 1, FIRST_STEP
  while step >= TOLERANCE do
    local improved = true
    while improved do
      improved = false
      for i = 1, #presets.free do
        for _, sign in ipairs({ 1, -1 }) do
          local y, err = move(plan, entries, x, best, i, step, sign)
          evals = evals + 1
          local moved = y ~= nil
          while y do
            x, best, improved = y, err, true
            y, err = move(plan, entries, x, best, i, step, sign)
            evals = evals + 1
          end
          if moved then break end -- up lowered it; the next sweep tries down again
        end
      end
    end
    step = step / 2
  end
  return x, best, evals
end
-- the last step the search takes: no single move of this size lowers the error at its end
F.LAST_STEP = FIRST_STEP
while F.LAST_STEP / 2 >= TOLERANCE do F.LAST_STEP = F.LAST_STEP / 2 end

-- A row's open assumptions: its source's weak assumptions (plan_published: what it does not
-- state, each key with its alternatives), and the network when the run spans nodes and its
-- source states none (plan_published.network): the preset's bandwidth per GPU or half of
-- it, as plan.range leaves it open for a question without gpu_network. Returns a list of
-- {key, values} and the sentence naming them.
function F.open_assumptions(run)
  local out, why = {}, {}
  local w = run.weak or {}
  local keys = {}
  for key in pairs(w) do if key ~= "why" then keys[#keys + 1] = key end end
  table.sort(keys)
  for _, key in ipairs(keys) do out[#out + 1] = { key = key, values = w[key] } end
  if w.why then why[#why + 1] = w.why end
  local gpu = presets.gpus[run.gpu]
  if gpu and run.gpus > gpu.per_node and not published.network[run.source] and not (run.opts or {}).gpu_network then
    out[#out + 1] = { key = "gpu_network", values = { gpu.network, gpu.network / 2 } }
    why[#why + 1] = string.format("network not stated (%.0f or %.1f GB/s per GPU)", gpu.network / 1e9, gpu.network / 2e9)
  end
  return out, #why > 0 and table.concat(why, "; ") or nil
end

-- The q quantile of the absolute errors of `rows` (the feasible ones) whose stack is not
-- `except`
local COVERAGE = 0.95
function F.quantile(rows, except, coverage)
  local errs = {}
  for _, row in ipairs(rows) do
    if row.feasible and row.run.stack ~= except then errs[#errs + 1] = math.abs(row.error) end
  end
  table.sort(errs)
  return errs[math.max(1, math.ceil((coverage or COVERAGE) * #errs))] or 0, #errs
end
F.COVERAGE = COVERAGE

-- The range of a row combines its open assumptions (lo_assumed to hi_assumed: the answers
-- under each alternative) with the model's own out-of-sample error: q, the COVERAGE quantile
-- of the absolute leave-one-out errors of every other stack's rows (the row's own stack never
-- enters its q, so the range is a prediction too): published in [lo, hi] is
-- |predicted / published - 1| <= q at either end. plan.range gives a user's answer the same
-- band, from every row (plan_presets.model_error).
local function widen(rows, stacks)
  for _, g in ipairs(stacks) do
    local q = F.quantile(rows, g)
    for _, row in ipairs(rows) do
      if row.feasible and row.run.stack == g then
        row.q, row.lo, row.hi = q, row.lo_assumed / (1 + q), row.hi_assumed / (1 - q)
        row.why = (row.why and row.why .. "; " or "") .. string.format("model error +-%.1f%% (the %.0fth percentile of "
          .. "the other stacks' leave-one-out errors)", 100 * q, 100 * COVERAGE)
      end
    end
  end
end

-- The leave-one-out table: for every stack, the parameters fitted on the others, and each
-- of its rows planned with them, with its range; and the fit on every row (the defaults
-- plan_presets.free carries). Returns {rows = {...}, fits = {stack -> {x, train_error,
-- evals}}, stacks = {...}, entries = shortlists, all = x, all_error}.
function F.loso(plan)
  local entries = shortlists(plan, published.all)
  local by_run = {}
  for _, e in ipairs(entries) do by_run[e.run] = e end
  local stacks, seen = {}, {}
  for _, run in ipairs(published.all) do
    if not seen[run.stack] then seen[run.stack] = true stacks[#stacks + 1] = run.stack end
  end
  local fits, rows = {}, {}
  for _, g in ipairs(stacks) do
    local train = {}
    for _, e in ipairs(entries) do if e.run.stack ~= g then train[#train + 1] = e end end
    local x, train_err, evals = F.fit(plan, train)
    fits[g] = { x = x, train_error = train_err, evals = evals }
  end
  -- the rows source by source, in the order the sources first appear
  local order, sources, at = {}, {}, {}
  for _, run in ipairs(published.all) do
    if not at[run.group] then at[run.group] = {} sources[#sources + 1] = run.group end
    table.insert(at[run.group], run)
  end
  for _, src in ipairs(sources) do for _, run in ipairs(at[src]) do order[#order + 1] = run end end
  for _, run in ipairs(order) do
    local x = fits[run.stack].x
    local e = by_run[run]
    local best = e and evaluate(plan, e, x)
    local row = { run = run, best = best, feasible = best ~= nil }
    if best then
      local pred = F.metric(best, run)
      row.predicted, row.error, row.lo, row.hi = pred, (pred - run.published) / run.published, pred, pred
      local open, why = F.open_assumptions(run)
      for _, a in ipairs(open) do
        for _, value in ipairs(a.values) do
          local r = evaluate(plan, e, x, a.key, value)
          if r then
            local p = F.metric(r, run)
            row.lo, row.hi = math.min(row.lo, p), math.max(row.hi, p)
          end
        end
      end
      row.why = why
      row.lo_assumed, row.hi_assumed = row.lo, row.hi
    end
    rows[#rows + 1] = row
  end
  widen(rows, stacks)
  local all, all_error = F.fit(plan, entries)
  return { rows = rows, fits = fits, stacks = stacks, entries = entries, all = all, all_error = all_error }
end

-- how a run's figure prints
function F.show(metric, x)
  if metric == "tokens" then return string.format("%.0f tok/s", x) end
  if metric == "tflops" then return string.format("%.0f TFLOP/s", x / 1e12) end
  return string.format("%.1f%%", 100 * x)
end

-- per source, in the order of the rows: {group, n, within (15%), mean (signed error), abs (mean
-- absolute error), held (ranges holding the published figure)}
function F.summary(rows)
  local out, by = {}, {}
  for _, row in ipairs(rows) do
    local g = row.run.group
    local s = by[g]
    if not s then
      s = { group = g, n = 0, within = 0, mean = 0, abs = 0, held = 0 }
      by[g], out[#out + 1] = s, s
    end
    s.n = s.n + 1
    if row.feasible then
      s.mean, s.abs = s.mean + row.error, s.abs + math.abs(row.error)
      if math.abs(row.error) <= 0.15 then s.within = s.within + 1 end
      if row.lo <= row.run.published and row.run.published <= row.hi then s.held = s.held + 1 end
    end
  end
  for _, s in ipairs(out) do s.mean, s.abs = s.mean / s.n, s.abs / s.n end
  return out
end

local function print_summary(rows, format)
  local n, within, held = 0, 0, 0
  if format == "markdown" then
    print("")
    print("| source | rows | within 15% | mean error | mean absolute error | ranges holding the figure |")
    print("|---|---|---|---|---|---|")
  end
  for _, s in ipairs(F.summary(rows)) do
    n, within, held = n + s.n, within + s.within, held + s.held
    local fmt = format == "markdown" and "| %s | %d | %d | %+.1f%% | %.1f%% | %d |" or "%-32s %3d rows, %3d within 15%%, mean %+.1f%%, |mean| %.1f%%, %d ranges hold"
    print(string.format(fmt, s.group, s.n, s.within, 100 * s.mean, 100 * s.abs, s.held))
  end
  local fmt = format == "markdown" and "| all | %d | %d (%.1f%%) | | | %d |" or "all: %d rows, %d within 15%% (%.1f%%), %d ranges hold"
  print(string.format(fmt, n, within, 100 * within / n, held))
end

-- each free parameter's value fitted on every row and its spread over the leave-one-out
-- folds: {name, all, lo, hi, at_bound (folds at a bound)}
function F.spread(fit)
  local x = fit.all
  local out = {}
  for i, f in ipairs(presets.free) do
    local s = { name = f.name .. (f.generation and (" " .. f.generation) or ""), all = x[i], lo = math.huge, hi = -math.huge,
      at_bound = 0, bounds = { f.lo, f.hi } }
    for _, g in ipairs(fit.stacks) do
      local v = fit.fits[g].x[i]
      s.lo, s.hi = math.min(s.lo, v), math.max(s.hi, v)
      local eps = 1e-9 * (f.hi - f.lo)
      if v <= f.lo + eps or v >= f.hi - eps then s.at_bound = s.at_bound + 1 end
    end
    out[i] = s
  end
  return out
end

local function print_spread(fit, format)
  local function v(name, x) return name == "layer_overhead" and string.format("%.0f us", x * 1e6) or string.format("%.3f", x) end
  if format == "markdown" then
    print("")
    print("| free parameter | fitted on every row | leave-one-out folds | bounds | folds at a bound |")
    print("|---|---|---|---|---|")
  else
    print(string.format("free parameters, fitted on every row and over the %d leave-one-out folds:", #fit.stacks))
  end
  for _, s in ipairs(F.spread(fit)) do
    local name = s.name:match("^%S+")
    local fmt = format == "markdown" and "| %s | %s | %s to %s | %s to %s | %d |" or "  %-20s %10s, folds %s to %s (bounds %s to %s, %d at a bound)"
    print(string.format(fmt, s.name, v(name, s.all), v(name, s.lo), v(name, s.hi), v(name, s.bounds[1]), v(name, s.bounds[2]),
      s.at_bound))
  end
end

-- the rows whose published figure lies outside their range, each with its reason
-- (plan_published.loso_misses or range_misses), as README.md lists them
function F.outside(rows)
  local out = {}
  for _, row in ipairs(rows) do
    if not (row.feasible and row.lo <= row.run.published and row.run.published <= row.hi) then
      local key = published.key(row.run)
      out[#out + 1] = { row = row, key = key, why = published.loso_misses[key] or published.range_misses[key] }
    end
  end
  return out
end

-- the LOSO table, as a table or as README.md's markdown rows, then the summary per source,
-- the folds' parameters and the rows outside their range
function F.print(plan, rows, format, fit)
  local show, layout = F.show, plan.layout
  local function variant(r) return string.format("zero %d, mb %d, recompute %s", r.zero, r.mb, r.recompute) end
  if format == "table" then
    print(string.format("%-32s %-16s %6s %-30s %14s %14s %7s  %s", "source", "model", "GPUs", "planner's layout",
      "published", "planner", "error", "range (weak assumption)"))
  elseif format == "markdown" then
    print("| published run | model | GPUs | published layout | planner's choice | published | planner (LOSO) | error | range |")
    print("|---|---|---|---|---|---|---|---|---|")
  end
  for _, row in ipairs(rows) do
    local run, best = row.run, row.best
    local pred = best and show(run.metric, row.predicted) or "does not fit"
    local err = best and string.format("%+.1f%%", 100 * row.error) or "-"
    local range = best and string.format("%s to %s", show(run.metric, row.lo), show(run.metric, row.hi)) or "-"
    if format == "table" then
      print(string.format("%-32s %-16s %6d %-30s %14s %14s %7s  %s", run.source, run.model, run.gpus,
        best and layout(best) or "does not fit", show(run.metric, run.published), pred, err, range))
    elseif format == "markdown" then
      local fixed = string.format("TP %d, PP %d%s%s%s", run.tp, run.pp, (run.cp or 1) > 1 and ", CP " .. run.cp or "",
        (run.ep or 1) > 1 and ", EP " .. run.ep or "", run.vpp and run.vpp > 1 and ", v " .. run.vpp or "")
      print(string.format("| %s | %s, seq %d, batch %d | %d %s | %s | %s | %s %s | %s | %s | %s |", run.source, run.model,
        run.seq, run.global_batch, run.gpus, run.gpu, fixed, best and (layout(best) .. ", " .. variant(best)) or "-",
        run.metric:upper(), show(run.metric, run.published), pred, err, range))
    end
  end
  print_summary(rows, format)
  if fit then print_spread(fit, format) end
  print("")
  print("Outside their range:")
  for _, o in ipairs(F.outside(rows)) do
    local row = o.row
    print(string.format("- %s, %s on %d GPUs (%s, range %s to %s): %s", row.run.source, row.run.model, row.run.gpus,
      row.feasible and string.format("%+.1f%%", 100 * row.error) or "does not fit",
      row.feasible and F.show(row.run.metric, row.lo) or "-", row.feasible and F.show(row.run.metric, row.hi) or "-",
      o.why or "NOT LISTED in plan_published.loso_misses or range_misses"))
  end
end

return F
