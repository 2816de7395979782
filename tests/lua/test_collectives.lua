-- Every collective at any world size, checked against closed forms of rank arithmetic:
-- with x_r = r + 1 on rank r, sum = n(n+1)/2, max = n, min = 1, prod = n!.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local dist = lab.dist
local r, n = dist.rank(), dist.world()

local function fact(k) local p = 1 for i = 2, k do p = p * i end return p end

T.test("facts", function()
  T.ok(r >= 0 and r < n, "rank in range")
  T.eq(dist.local_world(), n, "one node")
  T.eq(dist.local_rank(), r)
  T.ok(lab.threads() >= 1)
end)

T.test("all_reduce ops and dtypes", function()
  for _, dt in ipairs({ "f32", "f64", "i32", "i64", "bf16", "f16" }) do
    local x = lab.full({ 5 }, r + 1, { dtype = dt })
    dist.all_reduce(x)
    T.values(x, { n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2 }, 0, "sum " .. dt)
    -- ipairs, not pairs: pairs' order differs between ranks and would desync the calls
    for _, case in ipairs({ { "max", n }, { "min", 1 }, { "prod", fact(n) } }) do
      local op, want = case[1], case[2]
      local y = lab.full({ 3 }, r + 1, { dtype = dt })
      dist.all_reduce(y, op)
      T.eq(y[2], want, op .. " " .. dt)
    end
  end
  local a = lab.full({ 4 }, r + 1.0)
  dist.all_reduce(a, { op = "avg" })
  T.near(a[4], (n + 1) / 2, 1e-6, "avg")
  local z = lab.zeros(3)
  T.eq(dist.all_reduce(z), z, "returns the tensor (in place)")
end)

T.test("bf16 all_reduce rounds like NCCL (sum in f32, one rounding per step)", function()
  local x = lab.full({ 1 }, 1 + 2 ^ -7, { dtype = "bf16" })
  dist.all_reduce(x)
  -- exact sum n(1 + 2^-7) is representable for n <= 4
  T.eq(x:to("f64")[1], n * (1 + 2 ^ -7))
end)

T.test("broadcast and reduce", function()
  for root = 0, n - 1 do
    local x = lab.full({ 4 }, r * 10.0)
    dist.broadcast(x, root)
    T.eq(x[3], root * 10, "broadcast from " .. root)
    local y = lab.full({ 2 }, r + 1.0)
    dist.reduce(y, root)
    if r == root then T.eq(y[1], n * (n + 1) / 2, "reduce at root") else T.eq(y[1], r + 1, "non-root unchanged") end
  end
end)

T.test("all_gather to a list and into a tensor", function()
  local x = lab.tensor({ r, r * 2 }, { dtype = "f32" })
  local list = dist.all_gather(x)
  T.eq(#list, n)
  for q = 0, n - 1 do T.values(list[q + 1], { q, 2 * q }) end
  local out = {}
  dist.all_gather(out, x)
  T.values(out[n], { n - 1, 2 * (n - 1) })
  local flat = lab.zeros(2 * n)
  dist.all_gather_into_tensor(flat, x)
  T.eq(flat[2 * n], 2 * (n - 1))
  local stacked = lab.zeros(n, 2)
  dist.all_gather_into_tensor(stacked, x)
  T.values(stacked[1], { 0, 0 })
end)

T.test("reduce_scatter", function()
  -- rank r contributes (r + 1) * [1..n*2]; rank q gets block q of the sum
  local input = lab.arange(1, 2 * n + 1, { dtype = "f32" }) * (r + 1)
  local out = lab.zeros(2)
  dist.reduce_scatter(out, input)
  local s = n * (n + 1) / 2
  T.values(out, { (2 * r + 1) * s, (2 * r + 2) * s })
  local parts = {}
  for q = 1, n do parts[q] = lab.full({ 2 }, q * 1.0) end
  local o2 = lab.zeros(2)
  dist.reduce_scatter(o2, parts, "max")
  T.values(o2, { r + 1, r + 1 })
end)

T.test("all_to_all", function()
  -- block q of rank r's input is 100 r + q; afterwards block q holds 100 q + r
  local input = lab.zeros(n, 2)
  for q = 1, n do input[q] = 100 * r + (q - 1) end
  local out = lab.zeros(n, 2)
  dist.all_to_all(out, input)
  for q = 1, n do T.eq(out[q][2], 100 * (q - 1) + r) end
end)

T.test("send/recv and isend/irecv around a ring", function()
  if n == 1 then return end
  local right, left = (r + 1) % n, (r - 1 + n) % n
  local msg, got = lab.full({ 3 }, r * 1.0), lab.zeros(3)
  local hs = dist.isend(msg, right, { tag = 7 })
  local hr = dist.irecv(got, left, { tag = 7 })
  hr:wait()
  hs:wait()
  T.eq(got[1], left, "ring neighbour's value")
  -- blocking pair, ordered to avoid deadlock
  local t = lab.full({ 2 }, r * 1.0)
  if r % 2 == 0 then
    if r + 1 < n then dist.send(t, r + 1) end
  elseif r % 2 == 1 then
    dist.recv(t, r - 1)
    T.eq(t[1], r - 1)
  end
end)

T.test("async collectives return handles", function()
  local x = lab.full({ 1000 }, r + 1.0)
  local h = dist.all_reduce(x, { async = true })
  h:wait()
  T.eq(x[1000], n * (n + 1) / 2)
  local y = lab.full({ 10 }, 1.0)
  local h2 = dist.all_reduce(y, { op = "avg", async = true })
  while not h2:test() do end
  T.eq(y[1], 1)
  local list = {}
  local h3 = dist.all_gather(list, lab.full({ 2 }, r * 1.0), { async = true })
  h3:wait()
  T.eq(list[n][1], n - 1)
  local b = lab.full({ 2 }, r * 1.0)
  dist.broadcast(b, n - 1, { async = true }):wait()
  T.eq(b[1], n - 1)
end)

T.test("groups: new_group and split", function()
  local evens = {}
  for q = 0, n - 1, 2 do evens[#evens + 1] = q end
  local g = dist.new_group(evens)
  if r % 2 == 0 then
    T.eq(g:size(), #evens)
    T.eq(g:rank(), r // 2)
    local x = lab.full({ 1 }, r * 1.0)
    dist.all_reduce(x, { group = g })
    local want = 0
    for _, q in ipairs(evens) do want = want + q end
    T.eq(x[1], want)
  else
    T.raises(function() dist.all_reduce(lab.ones(1), { group = g }) end,
      "rank " .. r, "all_reduce", "not a member")
  end
  local halves = dist.split(r % 2)
  local y = lab.ones(1)
  dist.all_reduce(y, { group = halves })
  T.eq(y[1], halves:size())
  T.eq(dist.rank(halves), r // 2)
  dist.barrier()
  dist.barrier({ group = halves })
end)

T.test("stats count calls and bytes per op and group", function()
  dist.reset_stats()
  local x = lab.zeros(256) -- 1 KiB
  dist.all_reduce(x)
  dist.all_reduce(x)
  local out = lab.zeros(256 * n)
  dist.all_gather_into_tensor(out, x)
  local s = dist.stats().world
  T.eq(s.all_reduce.calls, 2)
  T.eq(s.all_reduce.bytes, 2048)
  T.eq(s.all_reduce.wire_bytes, math.floor(2 * 1024 * 2 * (n - 1) / n + 0.5), "ring all-reduce 2(n-1)/n")
  T.eq(s.all_gather.bytes, 1024 * n)
  T.eq(s.all_gather.wire_bytes, 1024 * (n - 1), "all-gather (n-1)/n of the output")
end)

T.test("bad input gives clear errors and leaves the job usable", function()
  local rr = "rank " .. r .. ":"
  T.raises(function() dist.all_reduce(lab.ones(4, 4):t()) end, rr, "all_reduce", "not contiguous")
  T.raises(function() dist.all_reduce(lab.ones(4), "median") end, rr, "unknown reduction op", "median")
  T.raises(function() dist.all_reduce(lab.ones(4, { dtype = "i64" }), "avg") end, "avg", "i64")
  T.raises(function() dist.broadcast(lab.ones(2), n) end, rr, "broadcast", "src " .. n, "size " .. n)
  T.raises(function() dist.all_gather_into_tensor(lab.zeros(3 * n + 1), lab.ones(3)) end,
    rr, "all_gather", "x 3 elements")
  T.raises(function() dist.all_gather_into_tensor(lab.zeros(3 * n, { dtype = "f64" }), lab.ones(3)) end,
    "all_gather", "f64", "f32")
  T.raises(function() dist.reduce_scatter(lab.zeros(2), lab.ones(2 * n + 1)) end, "reduce_scatter")
  T.raises(function() dist.send(lab.ones(1), r) end, rr, "send", "this rank itself")
  if n > 1 then -- tags are 0..32766: recovery's fences use the last tag MPI guarantees
    T.raises(function() dist.send(lab.ones(1), (r + 1) % n, { tag = 32767 }) end, rr, "send", "tag 32767 is out of range (0 to 32766)")
    T.raises(function() dist.recv(lab.ones(1), (r + 1) % n, { tag = -1 }) end, rr, "recv", "tag -1 is out of range")
  end
  T.raises(function() dist.new_group({ 0, n }) end, rr, "new_group", "not in the world")
  T.raises(function() dist.all_reduce("x") end, rr, "expected a tensor")
  -- checked mode: ranks disagreeing on a collective all get an error naming each call
  dist.set_checked(true)
  local count = (r == 0) and 4 or 5
  if n > 1 then
    T.raises(function() dist.all_reduce(lab.ones(count)) end, rr, "disagree", "rank 0: all_reduce(4 x f32", "rank 1: all_reduce(5 x f32")
    T.raises(function()
      if r == 0 then dist.broadcast(lab.ones(2), 0) else dist.all_reduce(lab.ones(2)) end
    end, "rank 0: broadcast", "rank 1: all_reduce")
  end
  dist.set_checked(false)
  local ok = lab.ones(1)
  dist.all_reduce(ok)
  T.eq(ok[1], n, "the job is still usable")
end)

-- torch's positional order all_reduce(t, op, group) was silently ignored past (t, op): the
-- collective ran on the world and hung on the ranks outside the group. Now refused (every
-- rank refuses before communicating, so the job stays usable).
T.test("an extra positional argument is refused, naming the options table", function()
  local g = dist.new_group({ 0 })
  local x = lab.ones(2)
  local calls = {
    { "all_reduce", function() dist.all_reduce(x, "sum", g) end, "argument #3 (a lab.dist.Group)" },
    { "broadcast", function() dist.broadcast(x, 0, g) end, "argument #3" },
    { "reduce", function() dist.reduce(x, 0, "sum", g) end, "argument #4" },
    { "all_gather", function() dist.all_gather(x, g) end, "argument #2 (a lab.dist.Group)" }, -- the convenience form
    { "all_gather", function() dist.all_gather({}, x, g) end, "argument #3 (a lab.dist.Group)" },
    { "all_gather_into_tensor", function() dist.all_gather_into_tensor(lab.zeros(2 * n), x, g) end, "argument #3" },
    { "reduce_scatter", function() dist.reduce_scatter(lab.zeros(1), lab.zeros(n), "sum", g) end, "argument #4" },
    { "all_to_all", function() dist.all_to_all(lab.zeros(n), lab.zeros(n), g) end, "argument #3" },
    { "send", function() dist.send(x, 0, 7) end, "argument #3 (a number)" },
  }
  for _, c in ipairs(calls) do
    local ok, err = pcall(c[2])
    T.ok(not ok, c[1] .. " accepted an extra positional argument")
    local want = "rank " .. r .. ": " .. c[1] .. ": " .. c[3]
    T.ok(tostring(err):find(want, 1, true) ~= nil, string.format("%q lacks %q", tostring(err), want))
    T.ok(tostring(err):find(c[1] .. "(t, {group = g})", 1, true) ~= nil, "the message shows the options table")
  end
  local all = {}
  for i = 0, n - 1 do all[#all + 1] = i end
  local y = lab.ones(2)
  dist.all_reduce(y, "sum", { group = dist.new_group(all) }) -- the right way: op positional, then options
  T.eq(y[1], n, "sum over a group of every rank")
  for _, c in ipairs({
    { function() dist.all_reduce(lab.ones(2), 5) end, "all_reduce: argument #2: a reduction op name expected" },
    { function() dist.all_reduce(lab.ones(2), "mean") end, "all_reduce: unknown reduction op 'mean'" },
    { function() dist.all_reduce(lab.ones(2), { op = 1 }) end, "all_reduce: op: a reduction op name expected" },
    { function() dist.reduce_scatter(lab.zeros(1), lab.zeros(n), "median") end, "reduce_scatter: unknown reduction op" },
  }) do
    local ok, err = pcall(c[1])
    T.ok(not ok and tostring(err):find("rank " .. r .. ": " .. c[2], 1, true) ~= nil, tostring(err))
  end
  local z = lab.ones(2)
  dist.all_reduce(z, nil, { op = "max" })
  T.eq(z[1], 1, "nil op with an options table")
end)

T.finish()
