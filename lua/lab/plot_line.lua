-- Line charts: several series on braille dots (2 x 4 per character), linear or log axes,
-- vertical event markers (┊ with a label above the plot), a legend. Without colour the
-- series differ by dash pattern (solid, dashed, dotted, dash-dot); with colour by colour.
-- series = {{name=, x={...}, y={...}}, ...} (checked by lab/plot.lua); the SVG has one
-- <path> per series through its drawable points. {points=true}: a scatter plot (dots, and
-- circles in the SVG, no lines).
local axes = require("lab.plot_axes")
local canvas = require("lab.plot_canvas")
local term = require("lab.plot_term")
local svg = require("lab.plot_svg")
local M = {}

local PATTERNS = {
  false,
  function(i) return i % 6 < 4 end,
  function(i) return i % 3 == 0 end,
  function(i) return i % 8 < 4 or i % 8 == 6 end,
}
local SAMPLES = { "───", "╌╌╌", "┈┈┈", "─┈─" }
local DASHES = { nil, "6 3", "2 3", "6 3 2 3" }

local function drawable(v, log) return v == v and v ~= math.huge and v ~= -math.huge and (not log or v > 0) end

-- the ends of the data on each axis (only points both axes can show)
local function extent(series, o)
  local x0, x1, y0, y1 = math.huge, -math.huge, math.huge, -math.huge
  for _, s in ipairs(series) do
    for i, y in ipairs(s.y) do
      local x = s.x[i]
      if drawable(x, o.logx) and drawable(y, o.logy) then
        x0, x1, y0, y1 = math.min(x0, x), math.max(x1, x), math.min(y0, y), math.max(y1, y)
      end
    end
  end
  if x0 > x1 then error(string.format("rank %d: lab.plot.line: no point can be drawn (every value is nan, inf%s)",
    lab.dist.rank(), (o.logx or o.logy) and ", or <= 0 on a log axis" or ""), 0) end
  for _, m in ipairs(o.marks or {}) do
    if drawable(m.x, o.logx) then x0, x1 = math.min(x0, m.x), math.max(x1, m.x) end
  end
  if o.ymin then y0 = math.min(y0, o.ymin) end
  if o.ymax then y1 = math.max(y1, o.ymax) end
  return x0, x1, y0, y1
end

-- sizes such as 256, 512, 1024: a log axis in base 2 then puts a tick at each
local function powers_of_2(series)
  for _, s in ipairs(series) do
    for _, x in ipairs(s.x) do
      if not (x >= 1 and math.type(x) ~= nil and x == math.floor(x) and (math.floor(x) & (math.floor(x) - 1)) == 0) then return false end
    end
  end
  return true
end

local function whole_x(series)
  for _, s in ipairs(series) do
    for _, x in ipairs(s.x) do
      if x ~= math.floor(x) then return false end
    end
  end
  return true
end

local function scales(series, o, pw, ph)
  local x0, x1, y0, y1 = extent(series, o)
  local xs = o.logx and axes.log(x0, x1, { target = math.max(pw // 10, 2), tight = true,
      base = (o.xfmt == "bytes" or powers_of_2(series)) and 2 or 10 })
    or axes.linear(x0, x1, math.max(pw // 12, 2), false, o.xfmt, whole_x(series))
  local ys = o.logy and axes.log(y0, y1, { target = ph // 2 + 1, base = o.yfmt == "bytes" and 2 or 10, tight = true })
    or axes.linear(y0, y1, math.max(ph // 3, 2), true, o.yfmt)
  return xs, ys
end

function M.term(series, o, st)
  local W, ph = st.width, o.height or 10
  local _, ys = scales(series, o, 40, ph)
  local margin = axes.label_width(ys, o.yfmt) + 1
  local ax, pw = margin + 1, W - margin - 1
  local xs = scales(series, o, pw, ph)
  local legend = {}
  local named = #series > 1 or series[1].name
  for i, s in ipairs(series) do
    legend[i] = { sample = o.points and "⠿" or st.colour and SAMPLES[1] or SAMPLES[(i - 1) % #SAMPLES + 1],
      colour = st.colour and term.colour_of(i) or nil, name = s.name or "" }
  end
  local lrows = named and axes.legend_lines(legend, W) or {}
  local marks = o.marks or {}
  local rows = (o.title and 1 or 0) + ((o.ylabel or #marks > 0) and 1 or 0) + ph + 2 + (o.xlabel and 1 or 0) + #lrows
  local g = canvas.grid(W, rows)
  local r = 1
  if o.title then axes.centre(g, r, o.title); r = r + 1 end
  local head = nil
  if o.ylabel or #marks > 0 then head = r; r = r + 1 end
  if o.ylabel then g:text(1, head, o.ylabel) end
  local top = r
  local function dot_x(v) local f = xs:frac(v); return f and math.floor(f * (2 * pw - 1) + 0.5) end
  local function dot_y(v) local f = ys:frac(v); return f and math.floor((1 - f) * (4 * ph - 1) + 0.5) end
  local dots = canvas.dots(pw, ph)
  for i, s in ipairs(series) do
    local pattern = not st.colour and PATTERNS[(i - 1) % #PATTERNS + 1] or nil
    local colour = st.colour and term.colour_of(i) or nil
    local prev, count = nil, 0
    for k, y in ipairs(s.y) do
      local x = s.x[k]
      if drawable(x, o.logx) and drawable(y, o.logy) then
        local p = { dot_x(x), dot_y(y) }
        if o.points then dots:dot(p[1], p[2], colour)
        elseif prev then count = dots:line(prev[1], prev[2], p[1], p[2], colour, pattern or nil, count)
        else dots:dot(p[1], p[2], colour) end
        prev = p
      else
        prev = nil
      end
    end
  end
  dots:blit(g, ax + 1, top)
  local free_from = o.ylabel and utf8.len(o.ylabel) + 2 or 1
  for _, m in ipairs(marks) do
    local dx = drawable(m.x, o.logx) and dot_x(m.x)
    if dx then
      local c = dx // 2
      for row = 0, ph - 1 do
        if not dots:has(c, row) then g:set(ax + 1 + c, top + row, "┊", st.colour and "2" or nil) end
      end
      local label = "▾" .. (m.label or "")
      local at = math.max(ax + 1 + c, free_from) -- right of what is already written, if it fits
      if at + utf8.len(label) - 1 <= W then
        g:text(at, head, label)
        free_from = at + utf8.len(label) + 1
      end
    end
  end
  axes.draw_y(g, ax, top, ph, ys, function(t) local d = dot_y(t); return d and top + d // 4 end, o.yfmt)
  axes.draw_x(g, ax, top + ph, pw, xs, function(t) local d = dot_x(t); return d and ax + 1 + d // 2 end, o.xfmt)
  r = top + ph + 2
  if o.xlabel then g:text(math.max(ax + 1, ax + 1 + (pw - utf8.len(o.xlabel)) // 2), r, o.xlabel); r = r + 1 end
  axes.draw_legend(g, r, lrows, ax + 1 > W // 3 and 1 or ax + 1)
  return g:render(st.colour)
end

function M.svg(series, o)
  local d = svg.new(o.svg_width or 720, o.svg_height or 400, o.title)
  local entries = {}
  local named = #series > 1 or series[1].name
  for i, s in ipairs(series) do entries[i] = { name = s.name or "", colour = term.hex_of(i), dash = DASHES[(i - 1) % #DASHES + 1], box = o.points } end
  local nrows = named and svg.legend_rows(entries, d.w) or 0
  local xs, ys = scales(series, o, 12 * 8, 10)
  local px, py, box = svg.frame(d, o, xs, ys, o.xfmt, o.yfmt, nrows)
  for _, m in ipairs(o.marks or {}) do
    local x = drawable(m.x, o.logx) and px(m.x)
    if x then
      d:line(x, box.y, x, box.y + box.h, "#888888", ' stroke-dasharray="3 3"')
      if m.label then d:text(x + 3, box.y + 11, m.label, "start", ' font-size="11" fill="#555555"') end
    end
  end
  for i, s in ipairs(series) do
    local pts = {}
    for k, y in ipairs(s.y) do
      local x = s.x[k]
      if drawable(x, o.logx) and drawable(y, o.logy) then pts[#pts + 1] = { px(x), py(y) } end
    end
    if o.points then
      for _, pt in ipairs(pts) do
        d:add(string.format('<circle cx="%.2f" cy="%.2f" r="%d" fill="%s"/>', pt[1], pt[2], i == 1 and 2 or 5, term.hex_of(i)))
      end
    elseif #pts > 0 then
      d:path(pts, term.hex_of(i), entries[i].dash and (' stroke-dasharray="' .. entries[i].dash .. '"') or nil)
    end
  end
  if named then svg.legend(d, entries, box.y + box.h + 48 + (o.xlabel and 0 or -14)) end
  return d:finish()
end

return M
