-- lab.plan's validation that cannot fit itself: leave-one-source-out. The free parameters
-- (plan_presets.free: the fractions of peak per GPU generation and the constants of terms no
-- source gives) are set, for each source in turn, by minimising the mean absolute relative
-- error on the other sources' rows (plan_published.all); the error reported for the source's
-- own rows is then a prediction, not a fit. The fit must be cheap enough for a test to redo
-- it: each row's candidates are its planner's best few layouts at the start parameters
-- (the enumeration is too slow to run inside a search), each evaluated at a parameter
-- vector once (cached on the parameters that row depends on), and the search is a
-- coordinate search: each parameter up or down by a step, steps shrinking. The left-out
-- rows are then re-evaluated on the same shortlist at the source's own fitted parameters.
-- F.fit(plan, entries) over every row gives the defaults plan_presets.free carries. Every
-- fit, and each row's shortlist, starts from plan_presets.free's start values, which no fit
-- chose, so nothing a fold sees was set by the source it predicts.
local presets = require("lab.plan_presets")
local published = require("lab.plan_published")
local F = {}

local CANDIDATES = 2 -- layouts per row the search re-evaluates
local STEPS = { 0.1, 0.03 } -- coordinate steps, as fractions of each parameter's bounds
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
    if not f.generation or (f.generation == gen and (f.name ~= "gemm_fp8" or fp8)) then out[#out + 1] = i end
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
  if key then o[key] = value end
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

-- the starting point of every fit (plan_presets.free's start: values no fit chose)
function F.start()
  local x = {}
  for i, f in ipairs(presets.free) do x[i] = f.start end
  return x
end

-- one coordinate move: parameter i up (or else down) by `step` of its bounds, if that lowers
-- the objective; returns the new point and error, or nil
local function move(plan, entries, x, best, i, step)
  local f = presets.free[i]
  for _, sign in ipairs({ 1, -1 }) do
    local y = copy(x)
    y[i] = math.min(f.hi, math.max(f.lo, x[i] + sign * step * (f.hi - f.lo)))
    if y[i] ~= x[i] then
      local err = objective(plan, entries, y)
      if err < best - 1e-9 then return y, err end
    end
  end
end

-- coordinate search from the start, two passes at each step size; returns x and the mean
-- absolute relative error
function F.fit(plan, entries)
  local x = F.start()
  local best = objective(plan, entries, x)
  for _, step in ipairs(STEPS) do
    local improved, passes = true, 0
    while improved and passes < 2 do
      improved, passes = false, passes + 1
      for i = 1, #presets.free do
        local y, err = move(plan, entries, x, best, i, step)
        if y then x, best, improved = y, err, true end
      end
    end
  end
  return x, best
end

-- The range of a row is its answer under its weak assumption (lo_assumed to hi_assumed),
-- widened by what the planner is measured to get wrong on sources it was not fitted on: q, the
-- COVERAGE quantile of the absolute leave-one-source-out errors of every other source's
-- rows (the row's own source never enters its q, so the range is a prediction too):
-- published in [lo, hi] is |predicted / published - 1| <= q at either end.
local COVERAGE = 0.95
local function widen(rows, groups)
  for _, g in ipairs(groups) do
    local errs = {}
    for _, row in ipairs(rows) do
      if row.feasible and row.run.group ~= g then errs[#errs + 1] = math.abs(row.error) end
    end
    table.sort(errs)
    local q = errs[math.max(1, math.ceil(COVERAGE * #errs))] or 0
    for _, row in ipairs(rows) do
      if row.feasible and row.run.group == g then
        row.q, row.lo, row.hi = q, row.lo_assumed / (1 + q), row.hi_assumed / (1 - q)
        row.why = (row.why and row.why .. "; " or "") .. string.format("the planner's error on the other sources (%.0f%% of "
          .. "their rows within %.1f%%)", 100 * COVERAGE, 100 * q)
      end
    end
  end
end
F.COVERAGE = COVERAGE

-- The leave-one-source-out table: for every source, the parameters fitted on the others,
-- and each of its rows planned with them (the full enumeration), with its range over the
-- row's weak assumption. Returns {rows = {...}, fits = {group -> x}, all = x fitted on all}.
function F.loso(plan)
  local entries = shortlists(plan, published.all)
  local by_run = {}
  for _, e in ipairs(entries) do by_run[e.run] = e end
  local groups, seen = {}, {}
  for _, run in ipairs(published.all) do
    if not seen[run.group] then seen[run.group] = true groups[#groups + 1] = run.group end
  end
  local fits, rows = {}, {}
  for _, g in ipairs(groups) do
    local train = {}
    for _, e in ipairs(entries) do if e.run.group ~= g then train[#train + 1] = e end end
    local x, train_err = F.fit(plan, train)
    fits[g] = { x = x, train_error = train_err }
    for _, run in ipairs(published.all) do
      if run.group == g then
        local e = by_run[run]
        local best = e and evaluate(plan, e, x)
        local row = { run = run, best = best, feasible = best ~= nil }
        if best then
          local pred = F.metric(best, run)
          row.predicted, row.error, row.lo, row.hi = pred, (pred - run.published) / run.published, pred, pred
          local w = run.weak
          if w then
            for key, alts in pairs(w) do
              if key ~= "why" then
                for _, value in ipairs(alts) do
                  local r = evaluate(plan, e, x, key, value)
                  if r then
                    local p = F.metric(r, run)
                    row.lo, row.hi = math.min(row.lo, p), math.max(row.hi, p)
                  end
                end
              end
            end
            row.why = w.why
          end
          row.lo_assumed, row.hi_assumed = row.lo, row.hi
        end
        rows[#rows + 1] = row
      end
    end
  end
  widen(rows, groups)
  return { rows = rows, fits = fits, groups = groups, entries = entries }
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

-- the LOSO table, as a table or as README.md's markdown rows, then the summary per source
function F.print(plan, rows, format)
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
end

return F
