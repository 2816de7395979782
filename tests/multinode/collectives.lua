-- Collectives across the simulated hosts (run by test_multinode.sh at 4 ranks): every
-- collective, a group that spans hosts, a group inside one host, and point-to-point between
-- hosts give the values one host gives. Prints "collectives ok" on every rank.
local dist = lab.dist
local r, n = dist.rank(), dist.world()
local function check(ok, what) if not ok then error(string.format("rank %d: %s", r, what), 0) end end

local x = lab.ones(3) * (r + 1)
dist.all_reduce(x)
check(x[1] == n * (n + 1) / 2, "all_reduce sum: got " .. x[1])
local b = lab.ones(2) * (r == n - 1 and 42 or 0)
dist.broadcast(b, n - 1)
check(b[2] == 42, "broadcast from the last rank: got " .. b[2])
local all = dist.all_gather(lab.ones(1) * r)
for q = 0, n - 1 do check(all[q + 1][1] == q, "all_gather slot " .. q) end
local ends = dist.new_group({ 0, n - 1 }) -- rank 0's host and the last rank's
if r == 0 or r == n - 1 then
  local y = lab.ones(1) * r
  dist.all_reduce(y, { group = ends })
  check(y[1] == n - 1, "all_reduce over {0, last}: got " .. y[1])
end
if r == 0 then dist.send(lab.ones(4) * 7, n - 1) end
if r == n - 1 then
  local t = lab.zeros(4)
  dist.recv(t, 0)
  check(t[4] == 7, "recv from rank 0: got " .. t[4])
end
dist.barrier()
print("collectives ok", r, dist.hostname())
