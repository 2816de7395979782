-- lab.dist.grid: Megatron's rank order (tp fastest, then cp, ep, dp, pp) and every group,
-- against group lists written out by hand, and each group working as a communicator.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r, n = lab.dist.rank(), lab.dist.world()

-- the members of the group of `name` holding rank r, from a hand-written partition
local function members(partition)
  for _, grp in ipairs(partition) do
    for _, x in ipairs(grp) do if x == r then return table.concat(grp, ",") end end
  end
end

local function check(g, want, label)
  local names = {}
  for name in pairs(want) do names[#names + 1] = name end
  table.sort(names) -- the same order on every rank: the all_reduces below must match
  for _, name in ipairs(names) do
    local partition = want[name]
    T.eq(table.concat(g[name .. "_group"]:ranks(), ","), members(partition), label .. " " .. name .. " group")
    -- the group is a working communicator: the sum of its members' world ranks
    local s = lab.tensor({ r }, { dtype = "i64" })
    lab.dist.all_reduce(s, { group = g[name .. "_group"] })
    local sum = 0
    for x in members(partition):gmatch("%d+") do sum = sum + tonumber(x) end
    T.eq(s[1], sum, label .. " " .. name .. " all_reduce")
  end
end

T.test("the world alone: every group is this rank or the world", function()
  local g = lab.dist.grid {}
  T.eq(g.dp, n, "dp defaults to the world")
  local all = {}
  for i = 0, n - 1 do all[#all + 1] = i end
  local solo = {}
  for i = 0, n - 1 do solo[#solo + 1] = { i } end
  check(g, { dp = { all }, tp = solo, pp = solo, cp = solo, ep = solo, edp = { all } }, "dp only")
end)

if n == 4 then
  T.test("tp=2 pp=2 (Megatron: tp neighbours, pp across)", function()
    local g = lab.dist.grid { tp = 2, pp = 2 }
    check(g, { tp = { { 0, 1 }, { 2, 3 } }, pp = { { 0, 2 }, { 1, 3 } }, dp = { { 0 }, { 1 }, { 2 }, { 3 } } }, "tp2 pp2")
    T.eq(g.pp_rank, r // 2)
    T.eq(g.tp_rank, r % 2)
  end)
  T.test("pp=2 dp=2", function()
    local g = lab.dist.grid { pp = 2, dp = 2 }
    check(g, { dp = { { 0, 1 }, { 2, 3 } }, pp = { { 0, 2 }, { 1, 3 } }, tp = { { 0 }, { 1 }, { 2 }, { 3 } } }, "pp2 dp2")
  end)
  T.test("ep=2 inside dp=4: experts over neighbours, expert gradients across", function()
    local g = lab.dist.grid { ep = 2 }
    check(g, { dp = { { 0, 1, 2, 3 } }, ep = { { 0, 1 }, { 2, 3 } }, edp = { { 0, 2 }, { 1, 3 } } }, "ep2")
  end)
  T.test("tp=2 cp=2 and dp_cp", function()
    local g = lab.dist.grid { tp = 2, cp = 2 }
    check(g, { tp = { { 0, 1 }, { 2, 3 } }, cp = { { 0, 2 }, { 1, 3 } }, dp_cp = { { 0, 2 }, { 1, 3 } }, dp = { { 0 }, { 1 }, { 2 }, { 3 } } }, "tp2 cp2")
  end)
  T.test("tp=2 ep=2 (dp=2)", function()
    local g = lab.dist.grid { tp = 2, ep = 2 }
    check(g, { tp = { { 0, 1 }, { 2, 3 } }, dp = { { 0, 2 }, { 1, 3 } }, ep = { { 0, 2 }, { 1, 3 } }, edp = { { 0 }, { 1 }, { 2 }, { 3 } } }, "tp2 ep2")
  end)
end

T.test("mistakes are named", function()
  T.raises(function() lab.dist.grid { tp = 3 * n } end, "does not match the world of " .. n)
  T.raises(function() lab.dist.grid { tp = 0 } end, "tp must be a positive integer")
  T.raises(function() lab.dist.grid { ep = n + 1, dp = n } end, "must divide dp")
  T.ok(lab.dist.grid({ tp = n }):describe():find("tp %[") ~= nil, "describe names the groups")
end)

T.finish()
