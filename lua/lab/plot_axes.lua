-- Axes shared by the chart kinds: scales (linear or log10) with "nice" ticks (1, 2, 5 x 10^k),
-- tick labels, and the terminal's axis lines (│ ┤ on the left, └ ─ ┬ below).
local M = {}

local Scale = {}
Scale.__index = Scale

-- where v falls between the ends, 0..1 (nil for a value a log axis cannot show)
function Scale:frac(v)
  if self.log then
    if not (v > 0) then return nil end
    v = math.log(v, self.base)
  end
  if self.hi == self.lo then return 0.5 end
  return (v - self.lo) / (self.hi - self.lo)
end

function M.nice_step(range, target)
  local rough = range / math.max(target, 1)
  local mag = 10 ^ math.floor(math.log(rough, 10))
  local norm = rough / mag
  return (norm < 1.5 and 1 or norm < 3 and 2 or norm < 7 and 5 or 10) * mag
end

-- A linear scale over [min, max] with about `target` ticks. loose: the ends move out to ticks
-- (a value axis); otherwise they stay at the data (a step or size axis) and ticks fall inside.
-- fmt "bytes": steps are nice numbers of KiB, MiB, ... rather than of bytes. integer: the
-- data are whole numbers, and so are the ticks.
function M.linear(min, max, target, loose, fmt, integer)
  if min == max then
    local pad = min == 0 and 1 or math.abs(min) * 0.1
    min, max = min - pad, max + pad
  end
  local unit = 1
  if fmt == "bytes" then
    local a = math.max(math.abs(min), math.abs(max))
    while a >= 1024 * unit do unit = unit * 1024 end
  end
  local step = M.nice_step((max - min) / unit, target) * unit
  if integer then step = math.max(step, 1) end -- steps, sizes, counts: no tick between two integers
  local lo, hi = min, max
  if loose then
    lo, hi = math.floor(min / step + 1e-9) * step, math.ceil(max / step - 1e-9) * step
  end
  local ticks = {}
  local k = math.ceil(lo / step - 1e-9)
  while k * step <= hi + step * 1e-9 do
    local t = k * step
    if math.abs(t) < step * 1e-9 then t = 0 end
    ticks[#ticks + 1] = t
    k = k + 1
  end
  return setmetatable({ lo = lo, hi = hi, step = step, ticks = ticks, log = false }, Scale)
end

-- A log scale over [min, max] (both > 0). o.base 2 (byte axes, sizes that are powers of 2):
-- ticks at every 1, 2, 4, 5 or 10 powers of 2, whichever keeps them at most about o.target;
-- base 10: ticks at the decades, and at 2 and 5 times them when there are fewer than three.
-- o.tight: the ends stay at the data (a size axis); otherwise they move out to whole powers.
function M.log(min, max, o)
  o = o or {}
  local base = o.base or 10
  local lmin, lmax = math.log(min, base), math.log(max, base)
  local lo, hi = math.floor(lmin + 1e-9), math.ceil(lmax - 1e-9)
  if hi == lo then hi = lo + 1 end
  local ticks = {}
  if base == 2 then
    local every = 10
    for _, k in ipairs({ 1, 2, 4, 5 }) do
      if (hi - lo) / k <= (o.target or 6) then every = k; break end
    end
    for d = math.ceil(lo / every) * every, hi, every do ticks[#ticks + 1] = 2.0 ^ d end
  else
    for d = lo, hi do
      ticks[#ticks + 1] = 10.0 ^ d
      if hi - lo < 3 and d < hi then
        ticks[#ticks + 1] = 2 * 10.0 ^ d
        ticks[#ticks + 1] = 5 * 10.0 ^ d
      end
    end
  end
  if o.tight and lmax > lmin then
    lo, hi = lmin, lmax
    local inside = {}
    for _, t in ipairs(ticks) do
      local l = math.log(t, base)
      if l >= lo - 1e-9 and l <= hi + 1e-9 then inside[#inside + 1] = t end
    end
    ticks = #inside >= 2 and inside or { min, max } -- less than a decade: the ends
  end
  return setmetatable({ lo = lo, hi = hi, ticks = ticks, log = true, base = base }, Scale)
end

local UNITS = { "", "K", "M", "G", "T", "P" }
local BYTE_UNITS = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" }

-- a number with few characters: 0.25, 40, 1.5K, 2M (SI), or bytes (1KiB, 1.5GiB)
function M.short(v, kind)
  if v ~= v then return "nan" end
  if kind == "bytes" then
    local i = 1
    local a = math.abs(v)
    while a >= 1024 and i < #BYTE_UNITS do a, v, i = a / 1024, v / 1024, i + 1 end
    local s = math.abs(v) >= 100 and string.format("%.0f", v) or string.format("%.3g", v)
    return s .. BYTE_UNITS[i]
  end
  local a = math.abs(v)
  if a >= 1e4 then
    local i = 1
    while a >= 1000 and i < #UNITS do a, v, i = a / 1000, v / 1000, i + 1 end
    return string.format("%.3g", v) .. UNITS[i]
  end
  if a == 0 then return "0" end
  if a < 1e-3 then return string.format("%.1e", v) end
  local s = string.format("%.3g", v)
  if s:find("e") then s = string.format("%.0f", v) end
  return s
end

-- the label of tick t: fmt may be a function, "bytes", or nil (decimals from the tick step)
function M.label(t, scale, fmt)
  if type(fmt) == "function" then return tostring(fmt(t)) end
  if fmt == "bytes" or scale.log then return M.short(t, fmt) end
  local a = math.max(math.abs(scale.lo), math.abs(scale.hi))
  if a >= 1e4 then return M.short(t) end
  local digits = math.max(0, -math.floor(math.log(scale.step, 10) + 1e-9))
  if digits > 15 then return string.format("%.3g", t) end -- (ticks 1e-300 apart: %.306f is refused)
  return string.format("%." .. digits .. "f", t)
end

-- the left axis: '│' down column `col` over rows top..top+h-1, '┤' and a right-aligned label
-- at each tick's row; row_of(t) gives the row. Labels that would share a row are dropped.
function M.draw_y(grid, col, top, h, scale, row_of, fmt)
  for r = top, top + h - 1 do grid:set(col, r, "│") end
  local used = {}
  for _, t in ipairs(scale.ticks) do
    local r = row_of(t)
    if r and r >= top and r < top + h and not used[r] then
      used[r] = true
      grid:set(col, r, "┤")
      local s = M.label(t, scale, fmt)
      grid:text(col - 1 - utf8.len(s), r, s)
    end
  end
end

-- the widest label of the scale's ticks
function M.label_width(scale, fmt)
  local w = 0
  for _, t in ipairs(scale.ticks) do w = math.max(w, utf8.len(M.label(t, scale, fmt))) end
  return w
end

-- the bottom axis: '└' at column col, '─' over w columns, '┬' at each tick's column (col_of),
-- the labels centred under their ticks on the next row, skipping any that would touch another
function M.draw_x(grid, col, row, w, scale, col_of, fmt)
  grid:set(col, row, "└")
  for c = col + 1, col + w do grid:set(c, row, "─") end
  local free_from = 1
  for _, t in ipairs(scale.ticks) do
    local c = col_of(t)
    if c and c >= col + 1 and c <= col + w then
      grid:set(c, row, "┬")
      local s = M.label(t, scale, fmt)
      local at = math.max(c - utf8.len(s) // 2, col)
      at = math.min(at, grid.w - utf8.len(s) + 1)
      if at >= free_from then
        grid:text(at, row + 1, s)
        free_from = at + utf8.len(s) + 1
      end
    end
  end
end

-- centred text on a row
function M.centre(grid, row, s, colour)
  grid:text(math.max(1, (grid.w - utf8.len(s)) // 2 + 1), row, s, colour)
end

-- the legend: "sample name" entries across rows of width w; entries = {{sample=, colour=, name=}}
function M.legend_lines(entries, w)
  local rows, cur, len = {}, {}, 0
  for _, e in ipairs(entries) do
    local n = utf8.len(e.sample) + 1 + utf8.len(e.name)
    if len > 0 and len + 3 + n > w then
      rows[#rows + 1] = cur
      cur, len = {}, 0
    end
    cur[#cur + 1] = e
    len = len + (len > 0 and 3 or 0) + n
  end
  if #cur > 0 then rows[#rows + 1] = cur end
  return rows
end

function M.draw_legend(grid, row, rows, x0)
  for i, entries in ipairs(rows) do
    local x = x0 or 1
    for j, e in ipairs(entries) do
      if j > 1 then x = x + 3 end
      x = grid:text(x, row + i - 1, e.sample, e.colour)
      x = grid:text(x + 1, row + i - 1, e.name)
    end
  end
end

-- a terminal chart's foot, under the x axis drawn at row r: the axis label (xlabel, if any)
-- and the legend rows; returns the rendered grid
function M.finish(g, ax, r, xlabel, lrows, colour)
  r = r + 2
  if xlabel then g:text(ax + 1, r, xlabel); r = r + 1 end
  M.draw_legend(g, r, lrows, 1)
  return g:render(colour)
end

return M
