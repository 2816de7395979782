-- lab.plot: pictures of results, in the terminal and as SVG files.
--   lab.plot(values [, opts])          every rank of the chunk (or opts.group) calls it, like a
--                                      collective; one chart is drawn by the group's first rank:
--                                      a series per rank, or one where ranks agree (lab/plot_ranks.lua)
--   lab.plot.line(series, opts)        line chart (braille), several series, logx/logy, marks
--   lab.plot.bar(data, opts)           bar chart across; {stacked=true} stacks the series
--   lab.plot.hist(values, opts)        histogram (bins=)
--   lab.plot.heatmap(matrix, opts)     heat map (rows=, cols= labels)
--   lab.plot.timeline(rows, opts)      a row of spans per stage or rank (pipeline schedules, profiles)
--   lab.plot.sparkline(values [, n])   ▁▂▃▅▇ of the last n values, a string for a progress line
-- Charts print on the calling rank and return nothing; {quiet=true} returns the text instead.
-- {svg='loss.svg'} also writes the chart as a self-contained SVG file. Width and colour: see
-- lab/plot_term.lua (width=, colour= override them).
local errors = require("lab.errors")
local term = require("lab.plot_term")
local svg = require("lab.plot_svg")
local kinds = {
  line = require("lab.plot_line"),
  bar = require("lab.plot_bar"),
  hist = require("lab.plot_hist"),
  heatmap = require("lab.plot_heat"),
  timeline = require("lab.plot_timeline"),
}

local plot = {}

-- the options each chart kind reads, and what each must be
local COMMON = { title = "string", xlabel = "string", width = "width", colour = "boolean", svg = "string",
  quiet = "boolean", svg_width = "int", svg_height = "int" }
local KIND_OPTS = {
  line = { ylabel = "string", logx = "boolean", logy = "boolean", marks = "table", height = "int", xfmt = "fmt",
    yfmt = "fmt", ymin = "number", ymax = "number", points = "boolean" },
  bar = { stacked = "boolean", fmt = "fmt" },
  hist = { bins = "int", range = "table", height = "int", xfmt = "fmt" },
  heatmap = { rows = "table", cols = "table", fmt = "fmt" },
  timeline = { start = "number", finish = "number", xfmt = "fmt" },
}

local function check_opts(fname, kind, o, extra)
  errors.opts(fname, 2, o)
  o = o or {}
  for k, v in pairs(o) do
    local want = COMMON[k] or KIND_OPTS[kind][k] or (extra and extra[k])
    if not want then
      local names = {}
      for n in pairs(COMMON) do names[#names + 1] = n end
      for n in pairs(KIND_OPTS[kind]) do names[#names + 1] = n end
      for n in pairs(extra or {}) do names[#names + 1] = n end
      table.sort(names)
      errors.raise(fname, "unknown option '%s' (options: %s)", tostring(k), table.concat(names, ", "))
    end
    local ok
    if want == "width" then ok = math.type(v) == "integer" and v >= 24 and v <= 1000
    elseif want == "int" then ok = math.type(v) == "integer" and v >= 1 and v <= 10000
    elseif want == "fmt" then ok = v == "bytes" or type(v) == "function"
    elseif want == "any" then ok = true
    else ok = type(v) == want end
    if not ok then
      local what = ({ width = "an integer from 24 to 1000", int = "an integer from 1 to 10000", fmt = "'bytes' or a function" })[want]
        or ("a " .. want)
      errors.raise(fname, "option %s must be %s, got %s", k, what, type(v) == "number" and tostring(v) or type(v))
    end
  end
  if (o.height or 2) < 2 or (o.height or 2) > 200 then errors.raise(fname, "option height must be from 2 to 200, got %d", o.height) end
  return o
end

-- a list of numbers from a list or a tensor (any shape: its elements in order)
local function numbers(fname, v, what)
  if lab.is_tensor(v) then return v:reshape(-1):to("f64"):tolist() end
  if type(v) ~= "table" then errors.raise(fname, "%s must be a list of numbers or a tensor, got %s", what, type(v)) end
  for i, x in ipairs(v) do
    if type(x) ~= "number" then errors.raise(fname, "%s[%d] must be a number, got %s", what, i, type(x)) end
  end
  return v
end
plot._numbers = numbers

local function strings(fname, v, what)
  if type(v) ~= "table" then errors.raise(fname, "%s must be a list of strings, got %s", what, type(v)) end
  local out = {}
  for i, s in ipairs(v) do out[i] = tostring(s) end
  return out
end

-- s with each byte that is not part of valid UTF-8 as "?": the charts measure and cut their text
-- by characters (utf8.len), and a name such as a profile section's may be any bytes
local function valid_text(s)
  if utf8.len(s) then return s end
  local parts, i = {}, 1
  while true do
    local n, bad = utf8.len(s, i)
    if n then parts[#parts + 1] = s:sub(i) break end
    parts[#parts + 1] = s:sub(i, bad - 1) .. "?"
    i = bad + 1
  end
  return table.concat(parts)
end

-- x with its strings (in plain tables, a few levels down) made valid_text; copied only where
-- one changes, so the caller's tables are never written and large series are not copied
local function drawable(x, depth)
  if type(x) == "string" then return valid_text(x) end
  if type(x) ~= "table" or getmetatable(x) ~= nil or depth > 4 then return x end
  local out
  for k, v in pairs(x) do
    local c = type(v) == "number" and v or drawable(v, depth + 1) -- (NaN ~= NaN: numbers never change)
    if c ~= v and not out then
      out = {}
      for kk, vv in pairs(x) do out[kk] = vv end
    end
    if out then out[k] = c end
  end
  return out or x
end

-- prints (or returns, quiet) the terminal chart, and writes the SVG when asked
local function draw(fname, kind, data, o)
  data, o = drawable(data, 1), drawable(o, 1)
  local st = term.settings(o)
  local text = kinds[kind].term(data, o, st)
  if o.svg then svg.write(o.svg, kinds[kind].svg(data, o), fname) end
  if o.quiet then return text end
  print(text)
end
plot._draw = draw

local function series_of_line(fname, data)
  local function one(s, i)
    local what = i and string.format("series[%d]", i) or "the series"
    if type(s) ~= "table" or s.y == nil then errors.raise(fname, "%s must be {y={...}, x=, name=} or a list of numbers", what) end
    local y = numbers(fname, s.y, what .. ".y")
    local x = s.x and numbers(fname, s.x, what .. ".x") or nil
    if x and #x ~= #y then errors.raise(fname, "%s has %d x values and %d y values", what, #x, #y) end
    if not x then
      x = {}
      for k = 1, #y do x[k] = k end
    end
    if s.name ~= nil and type(s.name) ~= "string" then errors.raise(fname, "%s.name must be a string", what) end
    return { name = s.name, x = x, y = y }
  end
  if lab.is_tensor(data) or (type(data) == "table" and type(data[1]) == "number") then return { one({ y = data }) } end
  if type(data) ~= "table" then errors.raise(fname, "bad argument #1 (a list of numbers, a tensor, or a list of series expected, got %s)", type(data)) end
  if data.y ~= nil then return { one(data) } end
  if #data == 0 then errors.raise(fname, "no series to draw") end
  local out = {}
  for i, s in ipairs(data) do out[i] = one(s, i) end
  return out
end

function plot.line(data, opts)
  local fname = "lab.plot.line"
  local o = check_opts(fname, "line", opts)
  local series = series_of_line(fname, data)
  for i, m in ipairs(o.marks or {}) do
    if type(m) ~= "table" or type(m.x) ~= "number" or (m.label ~= nil and type(m.label) ~= "string") then
      errors.raise(fname, "marks[%d] must be {x=number, label=string}", i)
    end
  end
  return draw(fname, "line", series, o)
end

-- a list of {name=, values={...}} (values: numbers or a tensor), as the drawers take it
local function series_list(fname, given)
  local series = {}
  for i, s in ipairs(given) do
    if type(s) ~= "table" or s.values == nil then errors.raise(fname, "series[%d] must be {name=, values={...}}", i) end
    series[i] = { name = s.name and tostring(s.name), values = numbers(fname, s.values, string.format("series[%d].values", i)) }
  end
  return series
end

function plot.bar(data, opts)
  local fname = "lab.plot.bar"
  local o = check_opts(fname, "bar", opts)
  if type(data) ~= "table" or data.labels == nil then errors.raise(fname, "bad argument #1 ({labels={...}, values={...}} or {labels=, series={{name=, values=}}} expected)") end
  local labels = strings(fname, data.labels, "labels")
  local series = series_list(fname, data.series or { { values = data.values } })
  for i, s in ipairs(series) do
    local v = s.values
    if #v ~= #labels then errors.raise(fname, "series[%d] has %d values for %d labels", i, #v, #labels) end
    for k, x in ipairs(v) do
      if not (x >= 0 and x < math.huge) then errors.raise(fname, "series[%d].values[%d] is %s: bars show finite values >= 0", i, k, tostring(x)) end
    end
  end
  if #series == 0 or #labels == 0 then errors.raise(fname, "nothing to draw (no labels or no series)") end
  return draw(fname, "bar", { labels = labels, series = series }, o)
end

function plot.hist(data, opts)
  local fname = "lab.plot.hist"
  local o = check_opts(fname, "hist", opts)
  if o.range and not (type(o.range[1]) == "number" and type(o.range[2]) == "number" and o.range[1] < o.range[2]) then
    errors.raise(fname, "option range must be {lo, hi} with lo < hi")
  end
  local series
  if lab.is_tensor(data) or (type(data) == "table" and (type(data[1]) == "number" or #data == 0 and data.values == nil)) then
    series = { { values = numbers(fname, data, "the values") } }
  elseif type(data) == "table" and data.values then
    series = { { name = data.name, values = numbers(fname, data.values, "values") } }
  elseif type(data) == "table" then
    series = series_list(fname, data)
  else
    errors.raise(fname, "bad argument #1 (a list of numbers, a tensor, or a list of {name=, values=} expected, got %s)", type(data))
  end
  return draw(fname, "hist", series, o)
end

function plot.heatmap(m, opts)
  local fname = "lab.plot.heatmap"
  local o = check_opts(fname, "heatmap", opts)
  local rows = {}
  if lab.is_tensor(m) then
    if m:dim() ~= 2 then errors.raise(fname, "a heat map needs a 2-D tensor, got %d dims", m:dim()) end
    rows = m:to("f64"):tolist()
  elseif type(m) == "table" and #m > 0 then
    for i, r in ipairs(m) do rows[i] = numbers(fname, r, string.format("row %d", i)) end
  else
    errors.raise(fname, "bad argument #1 (a 2-D tensor or a list of rows of numbers expected)")
  end
  if o.rows then o.rows = strings(fname, o.rows, "option rows") end
  if o.cols then o.cols = strings(fname, o.cols, "option cols") end
  return draw(fname, "heatmap", rows, o)
end

function plot.timeline(rows, opts)
  local fname = "lab.plot.timeline"
  local o = check_opts(fname, "timeline", opts)
  if type(rows) ~= "table" or #rows == 0 then errors.raise(fname, "bad argument #1 (a list of rows {name=, spans={...}} expected)") end
  for i, r in ipairs(rows) do
    if type(r) ~= "table" or type(r.spans) ~= "table" then errors.raise(fname, "row %d must be {name=, spans={{start=, finish=, label=, kind=}}}", i) end
    for k, s in ipairs(r.spans) do
      if type(s) ~= "table" or type(s.start) ~= "number" or type(s.finish) ~= "number" or not (s.finish >= s.start) then
        errors.raise(fname, "row %d span %d must be {start=, finish=} with finish >= start", i, k)
      end
    end
  end
  return draw(fname, "timeline", rows, o)
end

local RISE = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" }

-- the last n values (all by default) as one line of ▁..█, scaled between their min and max;
-- values that are not finite are blanks
function plot.sparkline(values, n)
  local fname = "lab.plot.sparkline"
  local v = numbers(fname, values, "the values")
  errors.arg(n == nil or (math.type(n) == "integer" and n >= 1), fname, 2, "a positive integer or nil", n)
  local first = n and math.max(1, #v - n + 1) or 1
  local lo, hi = math.huge, -math.huge
  for i = first, #v do
    local x = v[i]
    if x == x and x ~= math.huge and x ~= -math.huge then lo, hi = math.min(lo, x), math.max(hi, x) end
  end
  local out = {}
  for i = first, #v do
    local x = v[i]
    if x == x and x ~= math.huge and x ~= -math.huge then
      out[#out + 1] = RISE[hi > lo and math.floor((x - lo) / (hi - lo) * 7 + 0.5) + 1 or 4]
    else
      out[#out + 1] = " "
    end
  end
  return table.concat(out)
end

plot._check_opts = check_opts
plot._settings = term.settings
local ranks = require("lab.plot_ranks")
ranks.install(plot)
return setmetatable(plot, { __call = function(_, values, opts) return ranks.plot(values, opts) end })
