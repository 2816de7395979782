-- Heat maps: a matrix of values as shaded cells (· ░ ▒ ▓ █ from the smallest to the largest,
-- coloured on a blue-to-yellow ramp when colour is on), row labels on the left, column labels
-- above, the scale below. NaN cells stay blank. matrix = {{row 1}, {row 2}, ...}.
local canvas = require("lab.plot_canvas")
local axes = require("lab.plot_axes")
local svg = require("lab.plot_svg")
local M = {}

local SHADES = { "·", "░", "▒", "▓", "█" }
local RAMP = { "38;5;61", "38;5;67", "38;5;72", "38;5;142", "38;5;226" }
local HEX = { { 68, 1, 84 }, { 59, 82, 139 }, { 33, 145, 140 }, { 94, 201, 98 }, { 253, 231, 37 } } -- viridis

local function range(m)
  local lo, hi = math.huge, -math.huge
  for _, row in ipairs(m) do
    for _, v in ipairs(row) do
      if v == v and v ~= math.huge and v ~= -math.huge then lo, hi = math.min(lo, v), math.max(hi, v) end
    end
  end
  if lo > hi then error(string.format("rank %d: lab.plot.heatmap: no finite value in the matrix", lab.dist.rank()), 0) end
  return lo, hi
end

-- the shade level (1-5) of v
local function level(v, lo, hi)
  if hi == lo then return 3 end
  return math.min(5, math.floor((v - lo) / (hi - lo) * 5) + 1)
end
M.level = level

function M.term(m, o, st)
  local W = st.width
  local lo, hi = range(m)
  local ncols = 0
  for _, row in ipairs(m) do ncols = math.max(ncols, #row) end
  local rl = o.rows or {}
  local lw = 0
  for i = 1, #m do lw = math.max(lw, utf8.len(tostring(rl[i] or i))) end
  lw = math.min(lw, W // 3) -- longer labels are cut
  if ncols > W - lw - 1 then
    error(string.format("rank %d: lab.plot.heatmap: %d columns do not fit in %d at width %d (a wider width=, or fewer columns)",
      lab.dist.rank(), ncols, W - lw - 1, W), 0)
  end
  local cw = math.max(1, math.min(6, (W - lw - 1) // math.max(ncols, 1)))
  local g = canvas.grid(math.max(W, lw + 1 + cw * ncols), (o.title and 1 or 0) + 1 + #m + 1 + (o.xlabel and 1 or 0))
  local r = 1
  if o.title then axes.centre(g, 1, o.title); r = 2 end
  local cl = o.cols or {}
  local free_from = 1
  for j = 1, ncols do
    local s = tostring(cl[j] or j)
    local at = lw + 2 + (j - 1) * cw
    if at >= free_from then
      g:text(at, r, s)
      free_from = at + utf8.len(s) + 1
    end
  end
  r = r + 1
  for i, row in ipairs(m) do
    local s = tostring(rl[i] or i)
    if utf8.len(s) > lw then s = s:sub(1, utf8.offset(s, lw + 1) - 1) end
    g:text(lw - utf8.len(s) + 1, r, s)
    for j = 1, ncols do
      local v = row[j]
      if v and v == v and v ~= math.huge and v ~= -math.huge then
        local l = level(v, lo, hi)
        for k = 1, cw do g:set(lw + 1 + (j - 1) * cw + k, r, SHADES[l], st.colour and RAMP[l] or nil) end
      end
    end
    r = r + 1
  end
  local x = g:text(lw + 2, r, axes.short(lo, o.fmt) .. " ")
  for l = 1, 5 do x = g:text(x, r, SHADES[l], st.colour and RAMP[l] or nil) end
  g:text(x + 1, r, axes.short(hi, o.fmt))
  if o.xlabel then g:text(lw + 2, r + 1, o.xlabel) end
  return g:render(st.colour)
end

local function hex(v, lo, hi)
  local f = hi == lo and 0.5 or (v - lo) / (hi - lo)
  local p = f * (#HEX - 1)
  local i = math.min(#HEX - 1, math.floor(p))
  local t = p - i
  local a, b = HEX[i + 1], HEX[math.min(i + 2, #HEX)]
  return string.format("#%02x%02x%02x", math.floor(a[1] + (b[1] - a[1]) * t + 0.5), math.floor(a[2] + (b[2] - a[2]) * t + 0.5),
    math.floor(a[3] + (b[3] - a[3]) * t + 0.5))
end

function M.svg(m, o)
  local lo, hi = range(m)
  local ncols = 0
  for _, row in ipairs(m) do ncols = math.max(ncols, #row) end
  local rl, cl = o.rows or {}, o.cols or {}
  local lw = 0
  for i = 1, #m do lw = math.max(lw, utf8.len(tostring(rl[i] or i))) end
  local left, top = 16 + 7 * lw, (o.title and 36 or 16) + 18
  local w = o.svg_width or 720
  local cs = math.max(4, math.min(40, (w - left - 20) / math.max(ncols, 1)))
  local h = top + cs * #m + 50
  local d = svg.new(w, h, o.title)
  if o.title then d:text(w / 2, 22, o.title, "middle", ' font-size="15"') end
  local every = math.max(1, math.ceil(7 * 4 / cs))
  for j = 1, ncols, every do d:text(left + (j - 0.5) * cs, top - 6, tostring(cl[j] or j), "middle", ' font-size="10"') end
  for i, row in ipairs(m) do
    d:text(left - 6, top + (i - 0.5) * cs + 4, tostring(rl[i] or i), "end", ' font-size="10"')
    for j = 1, ncols do
      local v = row[j]
      if v and v == v and v ~= math.huge and v ~= -math.huge then d:rect(left + (j - 1) * cs, top + (i - 1) * cs, cs, cs, hex(v, lo, hi)) end
    end
  end
  local y = top + cs * #m + 16
  d:text(left, y + 10, axes.short(lo, o.fmt), "end")
  for k = 0, 19 do d:rect(left + 6 + k * 8, y, 8, 12, hex(lo + (hi - lo) * k / 19, lo, hi)) end
  d:text(left + 6 + 160 + 6, y + 10, axes.short(hi, o.fmt))
  if o.xlabel then d:text(left, y + 30, o.xlabel) end
  return d:finish()
end

return M
