-- Timelines: a row per stage or rank, each span of time a block (a pipeline's forward and
-- backward micro-batches, a profile's sections and collectives), idle time as '·'. Without
-- colour the kinds differ by fill (█ ▓ ▒ ░) and a span's label is written inside it when it
-- fits; with colour a span is a coloured background with its label in black.
-- rows = {{name=, spans={{start=, finish=, label=, kind=}}}} (checked by lab/plot.lua);
-- kinds are named in the legend in the order first seen.
local axes = require("lab.plot_axes")
local canvas = require("lab.plot_canvas")
local term = require("lab.plot_term")
local svg = require("lab.plot_svg")
local M = {}

local FILLS = { "█", "▒", "▓", "░", "▚", "▄" }
local BG = { "44", "43", "42", "45", "46", "41" }
local BG_ALT = { "104", "103", "102", "105", "106", "101" } -- the bright twin, for a span that follows one of its kind

local function kinds_and_range(rows, o)
  local kinds, index = {}, {}
  local t0, t1 = math.huge, -math.huge
  for _, row in ipairs(rows) do
    for _, s in ipairs(row.spans) do
      local k = s.kind or ""
      if not index[k] then
        kinds[#kinds + 1] = k
        index[k] = #kinds
      end
      t0, t1 = math.min(t0, s.start), math.max(t1, s.finish)
    end
  end
  if o.start then t0 = o.start end
  if o.finish then t1 = o.finish end
  if t0 > t1 then t0, t1 = 0, 1 end
  if t0 == t1 then t1 = t0 + 1 end
  return kinds, index, t0, t1
end

function M.term(rows, o, st)
  local W = st.width
  local kinds, index, t0, t1 = kinds_and_range(rows, o)
  local lw = 0
  for _, row in ipairs(rows) do lw = math.max(lw, utf8.len(row.name or "")) end
  lw = math.min(lw, W // 3) -- longer names are cut
  local ax = lw + 2
  local pw = W - ax - 1
  local function cell(t) return math.floor((t - t0) / (t1 - t0) * pw + 0.5) end
  local legend = {}
  for i, k in ipairs(kinds) do
    legend[i] = { sample = st.colour and "  " or FILLS[(i - 1) % #FILLS + 1]:rep(2), colour = st.colour and BG[(i - 1) % #BG + 1] or nil,
      name = k }
  end
  local lrows = (#kinds > 1 or kinds[1] ~= "") and axes.legend_lines(legend, W) or {}
  local g = canvas.grid(W, (o.title and 1 or 0) + #rows + 2 + (o.xlabel and 1 or 0) + #lrows)
  local r = 1
  if o.title then axes.centre(g, 1, o.title); r = 2 end
  for _, row in ipairs(rows) do
    local name = row.name or ""
    if utf8.len(name) > lw then name = name:sub(1, utf8.offset(name, lw + 1) - 1) end
    g:text(1, r, name)
    g:set(ax, r, "│")
    for c = 1, pw do g:set(ax + c, r, "·", st.colour and "2" or nil) end
    local prev_kind, prev_end, alt = nil, nil, false
    for _, s in ipairs(row.spans) do
      local i = index[s.kind or ""]
      local c0, c1 = cell(s.start) + 1, math.max(cell(s.finish), cell(s.start) + 1)
      local fill = st.colour and " " or FILLS[(i - 1) % #FILLS + 1]
      -- back-to-back spans of one kind would merge into one block of colour: alternate shades
      alt = prev_kind == s.kind and prev_end == c0 - 1 and not alt
      prev_kind, prev_end = s.kind, c1
      local colour = st.colour and (alt and BG_ALT or BG)[(i - 1) % #BG + 1] or nil
      for c = c0, c1 do g:set(ax + c, r, fill, colour) end
      local label = s.label and tostring(s.label) or ""
      local n = utf8.len(label)
      if n > 0 and n <= c1 - c0 + 1 then
        g:text(ax + c0 + (c1 - c0 + 1 - n) // 2, r, label, st.colour and ("30;" .. colour) or nil)
      end
    end
    r = r + 1
  end
  local xs = axes.linear(t0, t1, math.max(pw // 10, 2), false, o.xfmt)
  axes.draw_x(g, ax, r, pw, xs, function(t) return ax + math.max(cell(t), 1) end, o.xfmt)
  return axes.finish(g, ax, r, o.xlabel, lrows, st.colour)
end

function M.svg(rows, o)
  local kinds, index, t0, t1 = kinds_and_range(rows, o)
  local lw = 0
  for _, row in ipairs(rows) do lw = math.max(lw, utf8.len(row.name or "")) end
  local w = o.svg_width or 720
  local left, top, rh = 16 + 7 * lw, o.title and 36 or 16, 24
  local entries = {}
  for i, k in ipairs(kinds) do entries[i] = { name = k, colour = term.hex_of(i), box = true } end
  local nrows = (#kinds > 1 or kinds[1] ~= "") and svg.legend_rows(entries, w, left) or 0
  local h = top + #rows * rh + 40 + (o.xlabel and 18 or 0) + 18 * nrows
  local d = svg.new(w, h, o.title)
  if o.title then d:text(w / 2, 22, o.title, "middle", ' font-size="15"') end
  local pw = w - left - 20
  local function px(t) return left + (t - t0) / (t1 - t0) * pw end
  local xs = axes.linear(t0, t1, 8, false, o.xfmt)
  local bottom = top + #rows * rh
  for _, t in ipairs(xs.ticks) do
    d:line(px(t), top, px(t), bottom + 5, "#e4e4e4")
    d:text(px(t), bottom + 18, axes.label(t, xs, o.xfmt), "middle")
  end
  for k, row in ipairs(rows) do
    local y = top + (k - 1) * rh
    d:text(left - 6, y + rh / 2 + 4, row.name or "", "end")
    d:rect(left, y + 2, pw, rh - 4, "#f3f3f3")
    for _, s in ipairs(row.spans) do
      local x0, x1 = px(s.start), px(s.finish)
      d:rect(x0, y + 2, x1 - x0, rh - 4, term.hex_of(index[s.kind or ""]), ' stroke="#ffffff" stroke-width="0.5"')
      if s.label and 7 * utf8.len(tostring(s.label)) < x1 - x0 then
        d:text((x0 + x1) / 2, y + rh / 2 + 4, tostring(s.label), "middle", ' font-size="10" fill="#ffffff"')
      end
    end
  end
  d:line(left, bottom, left + pw, bottom, "#000000")
  if o.xlabel then d:text(left + pw / 2, bottom + 36, o.xlabel, "middle") end
  if nrows > 0 then svg.legend(d, entries, bottom + 36 + (o.xlabel and 18 or 0), left) end
  return d:finish()
end

return M
