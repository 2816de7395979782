-- Histograms: values counted into equal bins over their range (or o.range), drawn as columns
-- that rise in eighths of a character (▁▂▃▄▅▆▇█), counts on the left axis, the bin edges
-- below. Several series share the bins, side by side in each bin (fills █ ▓ ▒ ░ without
-- colour). series = {{name=, values={...}}} (checked by lab/plot.lua).
local axes = require("lab.plot_axes")
local canvas = require("lab.plot_canvas")
local term = require("lab.plot_term")
local svg = require("lab.plot_svg")
local M = {}

local RISE = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" }
local FILLS = { "█", "▓", "▒", "░", "▚", "▄" }

-- {lo=, hi=, counts={per series {per bin}}, max=}; non-finite values are left out
function M.count(series, o, bins)
  local lo, hi = math.huge, -math.huge
  if o.range then
    lo, hi = o.range[1], o.range[2]
  else
    for _, s in ipairs(series) do
      for _, v in ipairs(s.values) do
        if v == v and v ~= math.huge and v ~= -math.huge then lo, hi = math.min(lo, v), math.max(hi, v) end
      end
    end
  end
  if lo > hi then error(string.format("rank %d: lab.plot.hist: no finite value to count", lab.dist.rank()), 0) end
  if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
  local counts, top = {}, 0
  for i, s in ipairs(series) do
    counts[i] = {}
    for b = 1, bins do counts[i][b] = 0 end
    for _, v in ipairs(s.values) do
      if v >= lo and v <= hi then
        local b = math.min(bins, math.floor((v - lo) / (hi - lo) * bins) + 1)
        counts[i][b] = counts[i][b] + 1
        top = math.max(top, counts[i][b])
      end
    end
  end
  return { lo = lo, hi = hi, counts = counts, max = top }
end

function M.term(series, o, st)
  local W, ph, ns = st.width, o.height or 8, #series
  local bins = o.bins or 10
  local h = M.count(series, o, bins)
  local ys = axes.linear(0, math.max(h.max, 1), math.max(ph // 3, 2), true)
  if ys.step < 1 then ys = axes.linear(0, math.max(h.max, 1), 1, true) end
  local margin = axes.label_width(ys) + 1
  local ax = margin + 1
  if bins * ns > W - ax then
    error(string.format("rank %d: lab.plot.hist: %d bins x %d series need %d columns; %d fit at width %d (fewer bins=, or a wider width=)",
      lab.dist.rank(), bins, ns, bins * ns, W - ax, W), 0)
  end
  local cw = math.max(ns, (W - ax) // bins)
  local used = cw * bins
  local legend = {}
  for i, s in ipairs(series) do
    legend[i] = { sample = (st.colour and "█" or FILLS[(i - 1) % #FILLS + 1]):rep(2), colour = st.colour and term.colour_of(i) or nil,
      name = s.name or "" }
  end
  local lrows = ns > 1 and axes.legend_lines(legend, W) or {}
  local g = canvas.grid(math.max(W, ax + used), (o.title and 1 or 0) + ph + 2 + (o.xlabel and 1 or 0) + #lrows)
  local top = 1
  if o.title then axes.centre(g, 1, o.title); top = 2 end
  local per = (cw - (cw >= 3 and 1 or 0)) // ns -- a blank column between bins when they are wide
  for i = 1, ns do
    local fill = st.colour and "█" or FILLS[(i - 1) % #FILLS + 1]
    local colour = st.colour and term.colour_of(i) or nil
    for b = 1, bins do
      local e = math.floor(h.counts[i][b] / ys.hi * ph * 8 + 0.5)
      for k = 0, per - 1 do
        local col = ax + (b - 1) * cw + (i - 1) * per + k + 1
        for row = 0, e // 8 - 1 do g:set(col, top + ph - 1 - row, fill, colour) end
        if e % 8 > 0 then g:set(col, top + ph - 1 - e // 8, ns > 1 and not st.colour and fill or RISE[e % 8], colour) end
      end
    end
  end
  -- a tick on the row a column of that count tops out in
  axes.draw_y(g, ax, top, ph, ys, function(t) return top + ph - 1 - math.max(0, math.ceil(t / ys.hi * ph - 1e-9) - 1) end)
  local xs = axes.linear(h.lo, h.hi, math.max(used // 10, 2), false, o.xfmt)
  axes.draw_x(g, ax, top + ph, used, xs, function(t) return ax + 1 + math.floor((t - h.lo) / (h.hi - h.lo) * (used - 1) + 0.5) end,
    o.xfmt)
  local r = top + ph + 2
  if o.xlabel then g:text(ax + 1, r, o.xlabel); r = r + 1 end
  axes.draw_legend(g, r, lrows, 1)
  return g:render(st.colour)
end

function M.svg(series, o)
  local bins, ns = o.bins or 10, #series
  local h = M.count(series, o, bins)
  local d = svg.new(o.svg_width or 720, o.svg_height or 400, o.title)
  local entries = {}
  for i, s in ipairs(series) do entries[i] = { name = s.name or "", colour = term.hex_of(i), box = true } end
  local nrows = ns > 1 and svg.legend_rows(entries, d.w) or 0
  local xs = axes.linear(h.lo, h.hi, 8, false, o.xfmt)
  local ys = axes.linear(0, math.max(h.max, 1), 5, true)
  local px, py, box = svg.frame(d, o, xs, ys, o.xfmt, nil, nrows)
  local bw = box.w / bins / ns
  for i = 1, ns do
    for b = 1, bins do
      local x = px(h.lo + (b - 1) * (h.hi - h.lo) / bins) + (i - 1) * bw
      local y = py(h.counts[i][b])
      d:rect(x + 0.5, y, bw - 1, box.y + box.h - y, term.hex_of(i))
    end
  end
  if ns > 1 then svg.legend(d, entries, box.y + box.h + (o.xlabel and 48 or 34)) end
  return d:finish()
end

return M
