-- lab.plot(values) across ranks, as a collective: one chart, drawn on the group's first rank,
-- with a series per set of ranks whose values agree (one when all do); bar and hist alike;
-- a group of some ranks; the same call required of every rank. Runs at 1, 2 and 4 ranks.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r, n = lab.dist.rank(), lab.dist.world()
local all = n == 1 and "rank 0" or ("ranks 0-" .. (n - 1))

T.test("ranks that agree share one series", function()
  local text = lab.plot({ 1, 2, 3 }, { quiet = true, width = 60 })
  if r == 0 then
    T.ok(text and text:find("─── " .. all, 1, true), "one series for " .. all .. ":\n" .. tostring(text))
    T.ok(not text:find("╌╌╌", 1, true), "no second series")
  else
    T.eq(text, nil, "only rank 0 draws")
  end
end)

T.test("ranks that differ get a series each", function()
  local text = lab.plot({ 1, 2, 3 + r }, { quiet = true, width = 60 })
  if r == 0 then
    for q = 0, n - 1 do T.ok(text:find("rank " .. q, 1, true), "a series for rank " .. q .. ":\n" .. text) end
  end
  -- ranks 0 and 2 equal, 1 and 3 equal
  local t2 = lab.plot({ r % 2 }, { quiet = true, width = 60, kind = "bar" })
  if r == 0 and n == 4 then
    T.ok(t2:find("ranks 0,2", 1, true) and t2:find("ranks 1,3", 1, true), "grouped like the REPL:\n" .. t2)
  end
end)

T.test("values of different lengths, x values, hist", function()
  local y, x = {}, {}
  for i = 1, 5 + r do y[i], x[i] = i * i, i * 10 end
  local text = lab.plot(lab.tensor(y), { quiet = true, width = 60, x = x })
  if r == 0 then T.ok(text:find(" 40", 1, true) and not text:find(" 5 ", 1, true), "x labels from the x values (10 to 50 or more):\n" .. text) end
  local h = lab.plot({ 1, 2, 2, 3 }, { kind = "hist", bins = 3, quiet = true, width = 60 })
  if r == 0 then T.ok(h:find("┤") and (n == 1 or not h:find("rank 1", 1, true)), "one histogram:\n" .. h) end
end)

T.test("a group of some ranks draws on its first rank", function()
  if n < 2 then return end
  local g = lab.dist.new_group({ 1 })
  local text = nil
  if r == 1 then
    text = lab.plot({ 4, 5 }, { quiet = true, width = 60, group = g })
    T.ok(text and text:find("rank 1", 1, true), "rank 1 draws for its group:\n" .. tostring(text))
  end
  lab.dist.barrier()
end)

T.test("every rank must call it alike", function()
  if n < 2 then return end
  local ok, err = pcall(lab.plot, { 1 }, { quiet = true, kind = r == 1 and "bar" or "line" })
  T.ok(not ok and err:find("rank 0 drew a line chart and rank 1 a bar chart", 1, true), "on every rank: " .. tostring(err))
  -- one rank's mistake: it says why, the others that it was refused; nobody waits
  ok, err = pcall(lab.plot, r == 1 and { 1, "x" } or { 1, 2 }, { quiet = true })
  if r == 1 then T.ok(not ok and err:find("rank 1: lab.plot: the values%[2%] must be a number"), tostring(err))
  else T.ok(not ok and err:find("lab.plot: rank 1's arguments were refused", 1, true), tostring(err)) end
  ok, err = pcall(lab.plot, { 1 }, { kind = "pie" })
  T.ok(not ok and err:find("option kind must be 'line', 'bar' or 'hist', got pie", 1, true), tostring(err))
end)

T.finish()
