-- lab.plot's drawing, checked on known data: axes, ticks and their labels, where points and
-- bars land, the width, colour only when asked, the SVG files (tests/plot/check_svg.py), and
-- the errors. One rank: the grouping across ranks is tests/lua/test_plot_ranks.lua and the
-- REPL's tests/repl/test_repl_plot.c.
local here = arg[0]:match("(.*/)") or "./"
package.path = here .. "../?.lua;" .. package.path
local T = require("harness")
local P = lab.plot

local function lines(s)
  local out = {}
  for l in (s .. "\n"):gmatch("(.-)\n") do out[#out + 1] = l end
  return out
end
local function chars(l)
  local out = {}
  for _, c in utf8.codes(l) do out[#out + 1] = utf8.char(c) end
  return out
end
local function bits(ch) return utf8.codepoint(ch) - 0x2800 end
local function count(s, pat) local _, n = s:gsub(pat, "") return n end

T.test("line: axes, tick labels, and the first and last points in the corner cells", function()
  local text = P.line({ x = { 0, 1 }, y = { 0, 10 } }, { width = 40, height = 4, quiet = true })
  local L = lines(text)
  -- y ticks 0, 5, 10 (step 5): 10 on the top row, 5 on dot row round(0.5 * 15) = 8 (cell row 3), 0 at the bottom
  T.eq(#L, 6, "4 plot rows, the axis and its labels")
  T.ok(L[1]:find("^10 ┤"), "10 labels the top row: " .. L[1])
  T.ok(L[3]:find("^ 5 ┤"), "5 labels the third row: " .. L[3])
  T.ok(L[4]:find("^ 0 ┤"), "0 labels the bottom row: " .. L[4])
  T.ok(L[2]:find("^   │"), "the axis runs down between ticks: " .. L[2])
  local top, bottom = chars(L[1]), chars(L[4])
  T.eq(#top, 40, "the line reaches the last column")
  T.eq(bits(top[40]) & 0x08, 0x08, "(1, 10) is the top right dot of the last cell")
  T.eq(bits(bottom[5]) & 0x40, 0x40, "(0, 0) is the bottom left dot of the first cell")
  local axis = chars(L[5])
  T.eq(#axis, 40, "the x axis is as wide as the chart")
  T.eq(axis[4], "└", "the axes meet at the corner")
  T.eq(count(L[5], "┬"), #lines(L[6]:gsub("^%s+", ""):gsub("%s+", "\n")), "a label under every x tick")
  T.ok(L[6]:find("^    0 +1$"), "whole x values: ticks at 0 and 1 only, none between: " .. L[6])
  local F = lines(P.line({ x = { 0, 0.5, 1 }, y = { 0, 5, 10 } }, { width = 40, height = 4, quiet = true }))
  T.ok(F[6]:find("0%.0") and F[6]:find("0%.5") and F[6]:find("1%.0"), "fractional x values: ticks between: " .. F[6])
end)

T.test("line: every line fits the width, at any width", function()
  local y = {}
  for i = 1, 200 do y[i] = math.sin(i / 10) * 1e5 end
  for _, w in ipairs({ 24, 37, 60, 80, 133 }) do
    local L = lines(P.line({ { name = "a", y = y }, { name = "b", y = y } }, { width = w, quiet = true, title = "t", xlabel = "step" }))
    local widest = 0
    for _, l in ipairs(L) do widest = math.max(widest, utf8.len(l)) end
    T.eq(widest, w, "the widest line at width " .. w)
  end
end)

T.test("line: log axes put decades at equal distances", function()
  local L = lines(P.line({ x = { 1, 10, 100, 1000 }, y = { 1, 10, 100, 1000 } }, { logx = true, logy = true, width = 50, height = 7,
    quiet = true }))
  -- rows for 1000, 100, 10, 1 at dot rows 0, 9, 18, 27: cells 0, 2, 4, 6
  T.ok(L[1]:find("^1000 ┤"), L[1])
  T.ok(L[3]:find("^ 100 ┤"), L[3])
  T.ok(L[5]:find("^  10 ┤"), L[5])
  T.ok(L[7]:find("^   1 ┤"), L[7])
  T.ok(L[9]:find("1 +10 +100 +1000$"), "x decades labelled: " .. L[9])
  local ok, err = pcall(P.line, { 0, -1 }, { logy = true, quiet = true })
  T.ok(not ok and err:find("no point can be drawn"), "nothing drawable on a log axis: " .. tostring(err))
end)

T.test("line: series differ by dash without colour, by colour with it; marks", function()
  local plain = P.line({ { name = "train", y = { 1, 2, 3 } }, { name = "eval", y = { 3, 2, 1 } } },
    { width = 50, quiet = true, colour = false, marks = { { x = 2, label = "spike" } } })
  T.ok(not plain:find("\27"), "no escape codes without colour")
  T.ok(plain:find("─── train") and plain:find("╌╌╌ eval"), "dash samples in the legend")
  T.ok(plain:find("▾spike"), "the mark's label")
  T.ok(count(plain, "┊") >= 3, "the mark's line")
  local col = P.line({ { name = "train", y = { 1, 2, 3 } }, { name = "eval", y = { 3, 2, 1 } } }, { width = 50, quiet = true, colour = true })
  T.ok(col:find("\27%[34m") and col:find("\27%[33m"), "two colours")
  T.ok(col:find("\27%[0m"), "colour reset")
end)

T.test("bar: lengths proportional to values, in eighths; stacked segments", function()
  local L = lines(P.bar({ labels = { "a", "bb" }, values = { 8, 4 } }, { width = 40, quiet = true }))
  -- the scale ends at a tick (8), the bar area is 40 - 3 - 2 - 1 = 34 cells
  T.eq(count(L[1], "█"), 34, "8 fills the scale")
  T.eq(count(L[2], "█"), 17, "4 fills half")
  for _, e in ipairs({ "▏", "▎", "▍", "▌", "▋", "▊", "▉" }) do T.ok(not L[2]:find(e, 1, true), "no partial cell for a whole one") end
  local E = lines(P.bar({ labels = { "a", "bb" }, values = { 8, 1 } }, { width = 40, quiet = true }))
  T.eq(count(E[2], "█"), 4, "1 of 8 on 34 cells: 4 full cells")
  T.ok(E[2]:find("█▎ 1$"), "and 2 eighths (34 / 8 = 4.25): " .. E[2])
  T.ok(L[1]:find("^a  │") and L[2]:find("^bb │"), "labels on the left")
  T.ok(L[1]:find(" 8$") and L[2]:find(" 4$"), "values at the bar ends")
  local S = lines(P.bar({ labels = { "r0" }, series = { { name = "param", values = { 2 } }, { name = "grad", values = { 2 } } } },
    { width = 40, stacked = true, quiet = true }))
  local full, shade = count(S[1], "█"), count(S[1], "▓")
  T.eq(full, shade, "two equal segments")
  T.ok(S[#S]:find("██ param") and S[#S]:find("▓▓ grad"), "legend: " .. S[#S])
  local ok, err = pcall(P.bar, { labels = { "a" }, values = { -1 } }, { quiet = true })
  T.ok(not ok and err:find("values%[1%] is %-1"), "negative bars refused: " .. tostring(err))
end)

T.test("hist: counts per bin as column heights", function()
  local L = lines(P.hist({ 1, 1, 2, 3, 3, 3, 3 }, { bins = 3, width = 40, height = 4, quiet = true }))
  -- counts 2, 1, 4 on a 0..4 axis of 4 rows: columns of 2, 1 and 4 full cells
  local cw = (40 - 3) // 3
  local function height(b)
    local h = 0
    for r = 1, 4 do
      if chars(L[r])[3 + (b - 1) * cw + 1] == "█" then h = h + 1 end
    end
    return h
  end
  T.eq(height(1), 2, "bin 1")
  T.eq(height(2), 1, "bin 2")
  T.eq(height(3), 4, "bin 3")
  T.ok(L[1]:find("^4 ┤"), "the count axis ends at 4: " .. L[1])
end)

T.test("heatmap: the smallest and largest values get the lightest and darkest shades", function()
  local L = lines(P.heatmap({ { 0, 1 }, { 2, 3 } }, { rows = { "x", "y" }, cols = { "p", "q" }, width = 30, quiet = true }))
  T.ok(L[1]:find("p") and L[1]:find("q"), "column labels")
  T.ok(L[2]:find("^x ·+") and L[3]:find("█+$"), "shades: " .. L[2] .. " / " .. L[3])
  T.ok(L[4]:find("0 ·░▒▓█ 3"), "the scale: " .. L[4])
end)

T.test("timeline: a span covers its share of the row; idle is dotted", function()
  local L = lines(P.timeline({ { name = "s0", spans = { { start = 0, finish = 1, label = "F1", kind = "fwd" } } },
    { name = "s1", spans = { { start = 1, finish = 2, label = "B1", kind = "bwd" } } } }, { width = 44, quiet = true }))
  local pw = 44 - 4 - 1
  local r0, r1 = L[1]:match("│(.*)$"), L[2]:match("│(.*)$")
  -- 39 cells for time 0..2: F1 ends at cell round(19.5) = 20, B1 starts after it
  T.eq(pw, 39, "plot width")
  T.eq(count(r0, "·"), 19, "idle after F1")
  T.eq(count(r1, "·"), 20, "idle before B1")
  T.ok(r0:find("F1") and r1:find("B1"), "labels inside their spans")
  T.ok(r0:find("^█") and r1:find("^·"), "s0 starts busy, s1 idle")
  T.ok(L[#L]:find("██ fwd") and L[#L]:find("▒▒ bwd"), "legend: " .. L[#L])
end)

T.test("scatter (points=true) and the planner's chart: dots only, the chosen layout marked", function()
  local text = P.line({ x = { 0, 1 }, y = { 0, 10 } }, { width = 40, height = 4, quiet = true, points = true })
  local L = lines(text)
  T.eq(bits(chars(L[1])[40]), 0x08, "only the point's dot in the top right cell")
  T.eq(bits(chars(L[4])[5]), 0x40, "only the point's dot in the bottom left cell")
  T.eq(count(L[2] .. L[3], "[\xe2][\xa0-\xa3]."), 0, "no line between them")
  local results = { { mem_total = 40e9, step_s = 8, dp = 2, tp = 4, pp = 1 }, { mem_total = 60e9, step_s = 9, dp = 1, tp = 8, pp = 1 } }
  local out, real = {}, print
  print = function(x) out[#out + 1] = x end
  local ok, err = pcall(require("lab.plot_plan").draw, results, { width = 60 }, function(r) return "dp" .. r.dp .. " tp" .. r.tp end)
  print = real
  T.ok(ok, tostring(err))
  local chart = table.concat(out, "\n")
  T.ok(chart:find("▾dp2 tp4", 1, true) and chart:find("chosen: dp2 tp4", 1, true) and chart:find("2 layouts that fit", 1, true), chart)
end)

T.test("sparkline", function()
  T.eq(P.sparkline({ 0, 1, 2, 3, 4, 5, 6, 7 }), "▁▂▃▄▅▆▇█", "a ramp")
  T.eq(P.sparkline({ 5, 0, 7, 0 / 0 }, 3), "▁█ ", "the last 3, nan blank")
  T.eq(P.sparkline({ 2, 2 }), "▄▄", "flat")
end)

T.test("options are checked", function()
  local ok, err = pcall(P.line, { 1, 2 }, { widht = 50 })
  T.ok(not ok and err:find("unknown option 'widht'") and err:find("rank 0"), tostring(err))
  ok, err = pcall(P.line, { 1, 2 }, { width = 10 })
  T.ok(not ok and err:find("option width must be an integer from 24 to 1000, got 10"), tostring(err))
  ok, err = pcall(P.hist, { 1, 2 }, { bins = 100, width = 40 })
  T.ok(not ok and err:find("100 bins x 1 series need 100 columns; 37 fit at width 40"), tostring(err))
  ok, err = pcall(P.heatmap, { { 1, 2, 3 } }, { width = 24, cols = { "a" }, quiet = true })
  T.ok(ok, "a short cols list labels what it can: " .. tostring(err))
  ok, err = pcall(P.line, { 1, "x" })
  T.ok(not ok and err:find("the values%[2%] must be a number") or err:find("%[2%] must be a number"), tostring(err))
  ok, err = pcall(P.bar, { labels = { "a", "b" }, values = { 1 } })
  T.ok(not ok and err:find("1 values for 2 labels"), tostring(err))
  ok, err = pcall(P.line, { 1, 2 }, { svg = "/nonexistent-dir/x.svg", quiet = true })
  T.ok(not ok and err:find("cannot write the SVG file"), tostring(err))
end)

T.test("SVG files: well-formed, self-contained, a path per series with every point", function()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  local y1, y2, x = {}, {}, {}
  for i = 1, 37 do x[i], y1[i], y2[i] = i, 1 / i, 2 / i end
  y2[5] = 0 / 0 -- not drawable: left out of the path
  P.line({ { name = "train <&>", x = x, y = y1 }, { name = "eval", x = x, y = y2 } },
    { svg = dir .. "/line.svg", quiet = true, title = "loss \"quoted\"", logy = true, marks = { { x = 10, label = "m" } } })
  P.bar({ labels = { "a", "b" }, series = { { name = "p", values = { 1, 2 } }, { name = "q", values = { 2, 1 } } } },
    { svg = dir .. "/bar.svg", quiet = true, stacked = true })
  P.hist({ 1, 2, 2, 3 }, { svg = dir .. "/hist.svg", quiet = true })
  P.heatmap({ { 1, 2 }, { 3, 4 } }, { svg = dir .. "/heat.svg", quiet = true })
  P.timeline({ { name = "s0", spans = { { start = 0, finish = 1, label = "F1" } } } }, { svg = dir .. "/tl.svg", quiet = true })
  local check = here .. "../../plot/check_svg.py"
  local cases = { { "line.svg", "2 37 36" }, { "bar.svg", "0" }, { "hist.svg", "0" }, { "heat.svg", "0" }, { "tl.svg", "0" } }
  for _, c in ipairs(cases) do
    local p = io.popen(string.format("python3 %s %s/%s %s 2>&1", check, dir, c[1], c[2]))
    local out = p:read("a")
    local ok = p:close()
    T.ok(ok, c[1] .. ": " .. out)
  end
  -- the points where they belong: x from 1 to 37 spans the plot box (x 70 to 700 of 720), and
  -- y = 1/i on a log axis from 1/37 to 2 (eval reaches 2; box top 36 to bottom 400 - 48 - 18 = 334)
  local f = io.open(dir .. "/line.svg")
  local doc = f:read("a")
  f:close()
  local d = doc:match('<path d="([^"]*)"')
  local x0, y0 = d:match("^M(%S+) (%S+)")
  local x1, y1 = d:match("L(%S+) (%S+)$")
  T.near(tonumber(x0), 70, 1e-9, "first x")
  T.near(tonumber(x1), 700, 1e-9, "last x")
  T.near(tonumber(y0), 36 + 298 * (1 - math.log(37) / math.log(74)), 1e-4, "y of 1")
  T.near(tonumber(y1), 334, 1e-9, "y of 1/37 at the bottom")
  T.ok(doc:find("train &lt;&amp;&gt;", 1, true) and doc:find("loss &quot;quoted&quot;", 1, true), "text escaped")
  -- the checker can fail: a path too many, and a script
  local p = io.popen(string.format("python3 %s %s/line.svg 3 2>&1", check, dir))
  local out = p:read("a")
  T.ok(not p:close() and out:find("2 paths, want 3"), "the checker counts paths: " .. out)
  local f = io.open(dir .. "/bad.svg", "w")
  f:write('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script><text>x</text></svg>')
  f:close()
  p = io.popen(string.format("python3 %s %s/bad.svg 0 2>&1", check, dir))
  out = p:read("a")
  T.ok(not p:close() and out:find("<script>"), "the checker finds scripts: " .. out)
  os.execute("rm -rf " .. dir)
end)

-- The charts measure and cut text by characters (utf8.len), which is nil for bytes that are not
-- UTF-8: lab.prof.report() raised "plot_axes.lua:183: attempt to perform arithmetic on a nil
-- value" after a section named "sec\xff". Such bytes are drawn as "?" and the caller's tables
-- are left as they were.
T.test("names that are not UTF-8 are drawn with ? (prof.report with such a section raised)", function()
  local rows = { { name = "rank\xff 0", spans = { { start = 0, finish = 1, label = "a\xfe\xffb", kind = "k\xc3" } } } }
  local text = lab.plot.timeline(rows, { title = "t\xff", quiet = true, colour = false, width = 60 })
  T.ok(text:find("rank? 0", 1, true) and text:find("a??b", 1, true) and text:find("k?", 1, true), "drawn with ?: " .. text)
  T.eq(rows[1].name, "rank\xff 0", "the caller's rows are untouched")
  local bars = lab.plot.bar({ labels = { "x\xff", "y" }, values = { 1, 2 } }, { quiet = true, colour = false, width = 40 })
  T.ok(bars:find("x? ", 1, true), "a bar's label: " .. bars)
  lab.prof.reset()
  lab.prof.section("sec\xff\xfe", function() lab.randn(4, 4):sum() end)
  local ok, err = pcall(lab.prof.report, nil, { width = 60 })
  T.ok(ok, "prof.report draws its timeline: " .. tostring(err))
  lab.prof.reset()
end)

T.test("ticks 1e-300 apart are labelled (string.format refused %.306f)", function()
  local text = lab.plot.line({ y = { 1e-300, 3e-300, 2e-300 } }, { quiet = true, colour = false, width = 40 })
  T.ok(text:find("3e-300", 1, true) and text:find("1e-300", 1, true), "labels: " .. text)
end)

T.finish()
