-- Bar charts, drawn across: a row per category and series (grouped) or one row per category
-- with a segment per series (stacked), the value axis below, each bar's value at its end.
-- Bars grow in eighths of a character (▏▎▍▌▋▊▉█); stacked segments in whole characters,
-- told apart by fill (█ ▓ ▒ ░) without colour. data = {labels={...}, series={{name=,
-- values={...}}}} (checked by lab/plot.lua); values are >= 0.
local axes = require("lab.plot_axes")
local canvas = require("lab.plot_canvas")
local term = require("lab.plot_term")
local svg = require("lab.plot_svg")
local M = {}

local EIGHTHS = { "▏", "▎", "▍", "▌", "▋", "▊", "▉", "█" }
M.FILLS = { "█", "▓", "▒", "░", "▚", "▄" }

local function totals(data, stacked)
  local top = 0
  for c = 1, #data.labels do
    local sum = 0
    for _, s in ipairs(data.series) do
      local v = s.values[c] or 0
      sum = stacked and sum + v or math.max(sum, v)
    end
    top = math.max(top, sum)
  end
  return top
end

local function fill_of(i, colour) return colour and "█" or M.FILLS[(i - 1) % #M.FILLS + 1] end

function M.term(data, o, st)
  local W, stacked, ns = st.width, o.stacked, #data.series
  local fmt = o.fmt
  local vs = axes.linear(0, math.max(totals(data, stacked), 0), 4, true, fmt)
  local lw = 0
  for _, l in ipairs(data.labels) do lw = math.max(lw, utf8.len(l)) end
  lw = math.min(lw, W // 3)
  local vw = 0
  for c = 1, #data.labels do
    local sum = 0
    for _, s in ipairs(data.series) do sum = sum + (s.values[c] or 0); vw = math.max(vw, #axes.short(s.values[c] or 0, fmt)) end
    vw = math.max(vw, #axes.short(sum, fmt))
  end
  local ax = lw + 2
  local bw = W - ax - vw - 1
  local legend = {}
  for i, s in ipairs(data.series) do
    legend[i] = { sample = fill_of(i, st.colour):rep(2), colour = st.colour and term.colour_of(i) or nil, name = s.name or "" }
  end
  local lrows = (ns > 1 or data.series[1].name) and axes.legend_lines(legend, W) or {}
  local per = stacked and 1 or ns
  local body = #data.labels * per + ((not stacked and ns > 1) and #data.labels - 1 or 0)
  local g = canvas.grid(W, (o.title and 1 or 0) + body + 2 + (o.xlabel and 1 or 0) + #lrows)
  local r = 1
  if o.title then axes.centre(g, 1, o.title); r = 2 end
  local function cells(v) return v / vs.hi * bw end
  for c, label in ipairs(data.labels) do
    if utf8.len(label) > lw then label = label:sub(1, utf8.offset(label, lw) - 1) end
    g:text(1, r, label)
    if stacked then
      local cum, x = 0, 0
      for i, s in ipairs(data.series) do
        cum = cum + (s.values[c] or 0)
        local to = math.floor(cells(cum) + 0.5)
        for k = x + 1, to do g:set(ax + k, r, fill_of(i, st.colour), st.colour and term.colour_of(i) or nil) end
        x = math.max(x, to)
      end
      g:set(ax, r, "│")
      g:text(ax + x + 2, r, axes.short(cum, fmt))
      r = r + 1
    else
      for i, s in ipairs(data.series) do
        local v = s.values[c] or 0
        local fill = ns > 1 and not st.colour and fill_of(i) or "█"
        local e = fill == "█" and math.floor(cells(v) * 8 + 0.5) or 8 * math.floor(cells(v) + 0.5) -- shades have no eighths
        local colour = st.colour and term.colour_of(i) or nil
        for k = 1, e // 8 do g:set(ax + k, r, fill, colour) end
        if e % 8 > 0 then g:set(ax + e // 8 + 1, r, EIGHTHS[e % 8], colour) end
        g:set(ax, r, "│")
        g:text(ax + (e + 7) // 8 + 2, r, axes.short(v, fmt))
        r = r + 1
      end
      if ns > 1 and c < #data.labels then g:set(ax, r, "│"); r = r + 1 end
    end
  end
  axes.draw_x(g, ax, r, bw, vs, function(t) return ax + math.floor(cells(t) + 0.5) end, fmt)
  return axes.finish(g, ax, r, o.xlabel, lrows, st.colour)
end

function M.svg(data, o)
  local ns, stacked = #data.series, o.stacked
  local per = stacked and 1 or ns
  local bar_h, gap = 18, 10
  local entries = {}
  for i, s in ipairs(data.series) do entries[i] = { name = s.name or "", colour = term.hex_of(i), box = true } end
  local lw = 0
  for _, l in ipairs(data.labels) do lw = math.max(lw, utf8.len(l)) end
  local left = math.min(24 + 7 * lw, 260)
  local w = o.svg_width or 720
  local nrows = (ns > 1 or data.series[1].name) and svg.legend_rows(entries, w, left) or 0
  local top = o.title and 36 or 16
  local body = #data.labels * (per * bar_h + gap)
  local h = top + body + 40 + (o.xlabel and 18 or 0) + 18 * nrows
  local d = svg.new(w, h, o.title)
  if o.title then d:text(w / 2, 22, o.title, "middle", ' font-size="15"') end
  local vs = axes.linear(0, math.max(totals(data, stacked), 0), 6, true, o.fmt)
  local bw = w - left - 70
  local function px(v) return left + v / vs.hi * bw end
  for _, t in ipairs(vs.ticks) do
    d:line(px(t), top, px(t), top + body, "#e4e4e4")
    d:text(px(t), top + body + 18, axes.label(t, vs, o.fmt), "middle")
  end
  d:line(left, top, left, top + body, "#000000")
  d:line(left, top + body, left + bw, top + body, "#000000")
  local y = top + gap / 2
  for c, label in ipairs(data.labels) do
    d:text(left - 6, y + per * bar_h / 2 + 4, label, "end")
    local cum = 0
    for i, s in ipairs(data.series) do
      local v = s.values[c] or 0
      if stacked then
        d:rect(px(cum), y, px(cum + v) - px(cum), bar_h - 2, term.hex_of(i))
        cum = cum + v
      else
        d:rect(left, y + (i - 1) * bar_h, px(v) - left, bar_h - 2, term.hex_of(i))
        d:text(px(v) + 4, y + (i - 1) * bar_h + bar_h / 2 + 3, axes.short(v, o.fmt), "start", ' font-size="10"')
      end
    end
    if stacked then d:text(px(cum) + 4, y + bar_h / 2 + 3, axes.short(cum, o.fmt), "start", ' font-size="10"') end
    y = y + per * bar_h + gap
  end
  if o.xlabel then d:text(left + bw / 2, top + body + 36, o.xlabel, "middle") end
  if nrows > 0 then svg.legend(d, entries, top + body + 36 + (o.xlabel and 18 or 0), left) end
  return d:finish()
end

return M
