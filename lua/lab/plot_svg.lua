-- Charts as SVG files a browser shows as they are: one self-contained document, text as
-- <text> in the generic font families (no font files), no scripts, no links to anything.
-- The chart kinds draw with these primitives; frame() draws the axes of x/y charts.
local axes = require("lab.plot_axes")
local M = {}
local Doc = {}
Doc.__index = Doc

local function esc(s)
  return (tostring(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;" }))
end
M.esc = esc

local function n(v) return string.format("%.2f", v):gsub("%.?0+$", "") end

function M.new(w, h, title)
  local d = setmetatable({ w = w, h = h, parts = {} }, Doc)
  d.parts[1] = string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" ' ..
    'font-family="sans-serif" font-size="12">', w, h, w, h)
  if title then d.parts[#d.parts + 1] = "<title>" .. esc(title) .. "</title>" end
  d:rect(0, 0, w, h, "#ffffff")
  return d
end

function Doc:add(s) self.parts[#self.parts + 1] = s end

function Doc:rect(x, y, w, h, fill, extra)
  self:add(string.format('<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s/>', n(x), n(y), n(math.max(w, 0)),
    n(math.max(h, 0)), fill, extra or ""))
end

function Doc:line(x1, y1, x2, y2, stroke, extra)
  self:add(string.format('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"%s/>', n(x1), n(y1), n(x2), n(y2), stroke,
    extra or ""))
end

function Doc:text(x, y, s, anchor, extra)
  self:add(string.format('<text x="%s" y="%s" text-anchor="%s"%s>%s</text>', n(x), n(y), anchor or "start", extra or "",
    esc(s)))
end

-- one path through the points {{x, y}, ...}: "M x y L x y ..."
function Doc:path(points, stroke, extra)
  local d = {}
  for i, p in ipairs(points) do d[i] = (i == 1 and "M" or "L") .. n(p[1]) .. " " .. n(p[2]) end
  self:add(string.format('<path d="%s" fill="none" stroke="%s" stroke-width="1.5"%s/>', table.concat(d, " "), stroke,
    extra or ""))
end

function Doc:finish() return table.concat(self.parts, "\n") .. "\n</svg>\n" end

-- writes the document to path; errors name the function and the file
function M.write(path, text, fname)
  local f, err = io.open(path, "w")
  if not f then error(string.format("rank %d: %s: cannot write the SVG file: %s", lab.dist.rank(), fname, tostring(err)), 0) end
  f:write('<?xml version="1.0" encoding="UTF-8"?>\n', text)
  f:close()
end

-- The plot box of an x/y chart, its axes, ticks, grid lines, labels and title.
-- Returns px(v) and py(v) (nil for values a log axis cannot show) and the box {x, y, w, h}.
function M.frame(d, o, xs, ys, xfmt, yfmt, legend_rows)
  local left, right, top, bottom = 70, 20, o.title and 36 or 16, 48 + 18 * (legend_rows or 0)
  local box = { x = left, y = top, w = d.w - left - right, h = d.h - top - bottom }
  local function px(v)
    local f = xs:frac(v)
    return f and box.x + f * box.w
  end
  local function py(v)
    local f = ys:frac(v)
    return f and box.y + (1 - f) * box.h
  end
  if o.title then d:text(d.w / 2, 22, o.title, "middle", ' font-size="15"') end
  for _, t in ipairs(ys.ticks) do
    local y = py(t)
    if y and y >= box.y - 0.5 and y <= box.y + box.h + 0.5 then
      d:line(box.x, y, box.x + box.w, y, "#e4e4e4")
      d:text(box.x - 6, y + 4, axes.label(t, ys, yfmt), "end")
    end
  end
  for _, t in ipairs(xs.ticks) do
    local x = px(t)
    if x and x >= box.x - 0.5 and x <= box.x + box.w + 0.5 then
      d:line(x, box.y + box.h, x, box.y + box.h + 5, "#000000")
      d:text(x, box.y + box.h + 18, axes.label(t, xs, xfmt), "middle")
    end
  end
  d:line(box.x, box.y, box.x, box.y + box.h, "#000000")
  d:line(box.x, box.y + box.h, box.x + box.w, box.y + box.h, "#000000")
  if o.xlabel then d:text(box.x + box.w / 2, box.y + box.h + 36, o.xlabel, "middle") end
  if o.ylabel then d:text(16, box.y + box.h / 2, o.ylabel, "middle", string.format(' transform="rotate(-90 16 %s)"', n(box.y + box.h / 2))) end
  return px, py, box
end

-- legend entries {name=, colour=, dash=} in rows under the chart; returns nothing
function M.legend(d, entries, y0, x0)
  local x, y = x0 or 70, y0
  for _, e in ipairs(entries) do
    local w = 34 + 7 * utf8.len(e.name)
    if x + w > d.w - 10 and x > (x0 or 70) then x, y = x0 or 70, y + 18 end
    if e.box then d:rect(x, y - 9, 18, 10, e.colour)
    else d:line(x, y - 4, x + 18, y - 4, e.colour, ' stroke-width="2"' .. (e.dash and (' stroke-dasharray="' .. e.dash .. '"') or "")) end
    d:text(x + 24, y, e.name)
    x = x + w
  end
end

-- how many legend rows the entries need at this width
function M.legend_rows(entries, w, x0)
  local x, rows = x0 or 70, #entries > 0 and 1 or 0
  for _, e in ipairs(entries) do
    local ew = 34 + 7 * utf8.len(e.name)
    if x + ew > w - 10 and x > (x0 or 70) then x, rows = x0 or 70, rows + 1 end
    x = x + ew
  end
  return rows
end

return M
