-- gather and scatter (torch.distributed's) at any world size, every value compared: rank r's
-- tensor holds 8 r + its index, so every element says where it came from.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local dist = lab.dist
local r, n = dist.rank(), dist.world()

-- a [2, 3] tensor of dtype dt whose element k (0-based, row-major) is 8 * who + k
local function marked(who, dt)
  local vals = {}
  for k = 0, 5 do vals[k + 1] = 8 * who + k end
  return T.place(lab.tensor(vals, { dtype = dt or "f32" }):reshape({ 2, 3 }))
end

local function same(got, want, what)
  T.eq(got.dtype, want.dtype, what .. " dtype")
  T.eq(#got.shape, #want.shape, what .. " ndim")
  for d = 1, #want.shape do T.eq(got.shape[d], want.shape[d], what .. " shape") end
  T.values(got:reshape({ -1 }), want:reshape({ -1 }):tolist(), 0, what)
end

T.test("gather to every root, every value", function()
  for _, dt in ipairs({ "f32", "f64", "i32", "i64", "bf16" }) do
    for dst = 0, n - 1 do
      local l = dist.gather(marked(r, dt), dst)
      if r == dst then
        T.eq(#l, n, "one tensor per rank")
        for i = 1, n do same(l[i], marked(i - 1, dt), string.format("gather %s dst %d from %d", dt, dst, i - 1)) end
      else
        T.eq(l, nil, "nothing off the root")
      end
    end
  end
end)

T.test("gather into a given gather_list, and async", function()
  local list = nil
  if r == 0 then
    list = {}
    for i = 1, n do list[i] = T.place(lab.zeros({ 2, 3 })) end
  end
  local l = dist.gather(marked(r), 0, { gather_list = list })
  if r == 0 then
    T.eq(l, list, "returns the list given")
    for i = 1, n do same(list[i], marked(i - 1), "gather_list[" .. i .. "]") end
  end
  local h, l2 = dist.gather(marked(r + 7), n - 1, { async = true })
  h:wait()
  if r == n - 1 then
    for i = 1, n do same(l2[i], marked(i + 6), "async gather from " .. (i - 1)) end
  else
    T.eq(l2, nil, "async: nothing off the root")
  end
end)

T.test("scatter from every root, both forms, every value", function()
  for _, dt in ipairs({ "f32", "f64", "i32", "i64", "f16" }) do
    for src = 0, n - 1 do
      local list = {}
      for i = 1, n do list[i] = marked(4 * src + i - 1, dt) end
      -- lab's form: the list on src, the receiving tensor elsewhere
      local got = dist.scatter(r == src and list or T.place(lab.zeros({ 2, 3 }, { dtype = dt })), src)
      same(got, marked(4 * src + r, dt), string.format("scatter %s from %d", dt, src))
      -- torch's form: the receiving tensor everywhere, scatter_list on src
      local out = T.place(lab.zeros({ 2, 3 }, { dtype = dt }))
      local ret = dist.scatter(out, src, { scatter_list = r == src and list or nil })
      T.eq(ret, out, "returns the tensor given")
      same(out, marked(4 * src + r, dt), string.format("scatter_list %s from %d", dt, src))
    end
  end
  local out = T.place(lab.zeros({ 2, 3 }))
  local list = {}
  for i = 1, n do list[i] = marked(50 + i - 1) end
  local h, t = dist.scatter(r == 0 and list or out, 0, { async = true })
  h:wait()
  same(t, marked(50 + r), "async scatter")
end)

T.test("on a group: roots count the group's ranks; traffic is counted", function()
  -- the group of the odd world ranks, or of rank 0 alone at one rank
  local members = {}
  for w = 0, n - 1 do if w % 2 == 1 or n == 1 then members[#members + 1] = w end end
  local g = dist.new_group(members)
  if g:rank() >= 0 then
    local size, gr = g:size(), g:rank()
    dist.reset_stats()
    local l = dist.gather(marked(r), size - 1, { group = g })
    if gr == size - 1 then
      for i = 1, size do same(l[i], marked(members[i]), "group gather from world rank " .. members[i]) end
    end
    local list = {}
    for i = 1, size do list[i] = marked(members[i] + 30) end
    local got = dist.scatter(gr == 0 and list or T.place(lab.zeros({ 2, 3 })), 0, { group = g })
    same(got, marked(r + 30), "group scatter")
    local s = dist.stats()[tostring(g):match("^ProcessGroup%((.-), size")]
    T.ok(s ~= nil, "stats of " .. tostring(g))
    if s then
      T.eq(s.gather.calls, 1, "one gather counted")
      T.eq(s.gather.bytes, 24, "gather bytes: this rank's input")
      T.eq(s.gather.wire_bytes, gr == size - 1 and 0 or 24, "gather wire: the input, off the root")
      T.eq(s.scatter.wire_bytes, gr == 0 and 24 * (size - 1) or 0, "scatter wire: the root's other blocks")
    end
  else
    local ok, err = pcall(dist.gather, marked(r), 0, { group = g })
    T.ok(not ok and tostring(err):find("rank " .. r .. ": gather: this rank is not a member of group", 1, true), tostring(err))
    ok, err = pcall(dist.scatter, T.place(lab.zeros(2)), 0, { group = g })
    T.ok(not ok and tostring(err):find("rank " .. r .. ": scatter: this rank is not a member of group", 1, true), tostring(err))
  end
  g:destroy()
end)

T.test("roots out of range are refused on every rank, naming the value", function()
  for _, c in ipairs({
    { function() dist.gather(marked(r), n) end, string.format("gather: dst %d is not a rank of world (size %d)", n, n) },
    { function() dist.gather(marked(r), -1) end, "gather: dst -1 is not a rank of world" },
    { function() dist.scatter(T.place(lab.zeros(2)), n + 3) end, string.format("scatter: src %d is not a rank of world", n + 3) },
  }) do
    local ok, err = pcall(c[1])
    T.ok(not ok and tostring(err):find("rank " .. r .. ": " .. c[2], 1, true) ~= nil, tostring(err))
  end
end)

T.test("wrong lists and shapes name the op, the values and the rank", function()
  -- every rank the root of a group of its own, so each error is raised on every rank alone
  local solo = dist.split(r)
  for _, c in ipairs({
    { function() dist.gather(marked(r), 0, { group = solo, gather_list = { T.place(lab.zeros(6)) } }) end,
      "gather: gather_list[1] is [6] f32 but the tensor is [2, 3] f32" },
    { function() dist.gather(marked(r), 0, { group = solo, gather_list = { marked(0), marked(0) } }) end,
      "gather: gather_list has 2 tensors but the group has 1 ranks" },
    { function() dist.scatter({ marked(0, "i64") }, 0, { group = solo, scatter_list = nil }) end, nil },
    { function() dist.scatter(marked(0), 0, { group = solo, scatter_list = { marked(0, "f64") } }) end,
      "scatter: scatter_list[1] is [2, 3] f64 but the tensor is [2, 3] f32" },
    { function() dist.scatter(marked(0), 0, { group = solo }) end, "scatter: src (rank 0 of group" },
    { function() dist.scatter(5, 0, { group = solo }) end, "scatter: argument #1 must be a tensor or (on src) a list" },
  }) do
    local ok, err = pcall(c[1])
    if c[2] then
      T.ok(not ok and tostring(err):find("rank " .. r .. ": " .. c[2], 1, true) ~= nil, tostring(err))
    else
      T.ok(ok, "a one-tensor list on a group of one: " .. tostring(err))
    end
  end
  if n > 1 then -- a list off src, and gather_list off dst: refused on the ranks that pass them
    local ok, err = pcall(dist.scatter, { marked(0) }, 0, { group = solo })
    T.ok(ok, tostring(err)) -- on its own group every rank is src
    -- every rank calls, the root rightly: a refusal on some ranks alone reaches every rank
    -- before any enters the collective (the root would otherwise wait for them for good)
    local world_root = 0
    local blocks = {}
    for i = 1, n do blocks[i] = marked(0) end
    ok, err = pcall(dist.scatter, r == world_root and blocks or { marked(0) }, world_root)
    local want = r == world_root and "scatter: another member of world refused its arguments"
      or "scatter: rank " .. r .. " of world is not src"
    T.ok(not ok and tostring(err):find("rank " .. r .. ": " .. want, 1, true), tostring(err))
    ok, err = pcall(dist.gather, marked(r), world_root, r ~= world_root and { gather_list = {} } or {})
    want = r == world_root and "gather: another member of world refused its arguments"
      or "gather: gather_list is given on rank " .. r
    T.ok(not ok and tostring(err):find("rank " .. r .. ": " .. want, 1, true), tostring(err))
    -- the root alone refuses (no scatter_list): the others raise too instead of waiting
    ok, err = pcall(dist.scatter, marked(0), world_root)
    want = r == world_root and "scatter: src (rank 0 of world) needs scatter_list"
      or "scatter: another member of world refused its arguments"
    T.ok(not ok and tostring(err):find("rank " .. r .. ": " .. want, 1, true), tostring(err))
    -- one rank's output not contiguous (a check of the runtime's): the same
    local out = r == n - 1 and T.place(lab.zeros(3, 2)):t() or marked(0)
    ok, err = pcall(dist.scatter, out, world_root, r == world_root and { scatter_list = blocks } or {})
    want = r == n - 1 and "is not contiguous" or "scatter: another member of world refused its arguments"
    T.ok(not ok and tostring(err):find(want, 1, true), tostring(err))
    local back = dist.scatter(r == world_root and blocks or marked(0), world_root) -- the world still works
    same(back, marked(0), "scatter after the refusals")
  end
  solo:destroy()
end)

T.test("checked mode: ranks that disagree fail together", function()
  if n < 2 then return end
  dist.set_checked(true)
  local count = r == 0 and 4 or 5
  local ok, err = pcall(dist.gather, T.place(lab.ones(count)), 0)
  dist.set_checked(false)
  T.ok(not ok and tostring(err):find("desync: ranks of world disagree on the collective", 1, true) ~= nil, tostring(err))
  T.ok(tostring(err):find("gather(4 x f32, root=0)", 1, true) ~= nil, tostring(err))
  T.ok(tostring(err):find("gather(5 x f32, root=0)", 1, true) ~= nil, tostring(err))
end)

T.finish()
