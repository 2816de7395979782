-- Asynchronous checkpoint saves (lab.ckpt.save(dir, {async = true})): the files are byte for
-- byte those of a synchronous save; what the writer thread writes is the state when save
-- returned, whatever training does to the tensors meanwhile; a failure in any rank's writer
-- thread raises on every rank at wait() or at the next save, leaving the previous checkpoint
-- loadable and no step directory half in place (also a failure from the OS, not injected:
-- the step directory moved away mid-write); load waits for a save in flight.
-- (A process killed during an async write: tests/lua/single/test_ckpt_crash.lua at every file
-- operation on one rank, tests/lua/single/test_ckpt_async_kill.lua at 2 and 4 ranks.)
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local common = require("ckpt_common")
local C = lab._ckpt
local r, world = lab.dist.rank(), lab.dist.world_size()
local dir = common.tmpdir("ckpt-async")

local cfg = { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8 }
local function fresh()
  lab.manual_seed(1)
  local m = lab.ddp.wrap(lab.nn.GPT(cfg))
  return m, lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
end
local function step(m, opt, k)
  lab.manual_seed(1000 + k + 10 * r)
  local ids = lab.randint(0, 16, { 2, 8 })
  opt:zero_grad()
  local _, loss = m(ids, ids)
  loss:backward()
  opt:step()
end
-- parameters and Adam moments, cloned
local function state_of(m, opt)
  local out = {}
  for i, p in ipairs(m:parameters()) do
    out[#out + 1] = p:clone()
    local s = opt.state[i]
    if s then
      out[#out + 1] = s.m:clone()
      out[#out + 1] = s.v:clone()
    end
  end
  return out
end
local function same_state(a, b, what)
  T.eq(#a, #b, what .. ": tensor count")
  for i = 1, #a do T.eq(lab.max_abs_diff(a[i], b[i]), 0, what .. ": tensor " .. i) end
end
local function own_files(stepdir)
  local out = {}
  for _, n in ipairs(C.list_dir(stepdir) or {}) do
    if n:match(string.format("^rank%05d%%.", r)) then out[#out + 1] = n end
  end
  table.sort(out)
  return out
end

T.test("an async save writes byte for byte what a synchronous save writes", function()
  local m, opt = fresh()
  for k = 1, 3 do step(m, opt, k) end
  local a = lab.ckpt.save(dir .. "/sync", { model = m, optimizer = opt, step = 3, extra = { loss = 1.5 } })
  local b = lab.ckpt.save(dir .. "/async", { model = m, optimizer = opt, step = 3, extra = { loss = 1.5 }, async = true })
  lab.ckpt.wait()
  local fa, fb = own_files(a), own_files(b)
  T.eq(#fa, 2, "a safetensors file and an index per rank")
  T.eq(table.concat(fa, ","), table.concat(fb, ","), "the same file names")
  for _, n in ipairs(fa) do
    T.ok(common.read(a .. "/" .. n) == common.read(b .. "/" .. n), n .. " is the same bytes")
  end
  if r == 0 then T.eq(common.read(dir .. "/async/latest"), "step_00000003\n", "latest names the async step") end
end)

T.test("changing parameters and moments after save returns does not change what is written", function()
  local m, opt = fresh()
  for k = 1, 2 do step(m, opt, k) end
  local before = state_of(m, opt)
  lab.ckpt.save(dir .. "/race", { model = m, optimizer = opt, step = 2, async = true })
  -- training goes on at once, in place, while the writer thread may still be writing
  lab.no_grad(function()
    for i, p in ipairs(m:parameters()) do
      p:fill_(7)
      opt.state[i].m:fill_(7)
    end
  end)
  step(m, opt, 3)
  lab.ckpt.wait()
  local b, bopt = fresh()
  T.eq(lab.ckpt.load(dir .. "/race", { model = b, optimizer = bopt }).step, 2)
  same_state(state_of(b, bopt), before, "loaded vs the state when save returned")
end)

-- the failing rank's K-th file operation from the save's start is its writer thread's first
-- (rank 0 first makes the step directory: mkdir and the fsync of its parent)
local failing = world - 1
local K = failing == 0 and 3 or 1

local function failed_async_save(m, opt, sub, stepno)
  if r == failing then lab.ckpt.fail_at = K end
  -- save itself returns: the failure happens in the background
  local ok, err = pcall(lab.ckpt.save, dir .. "/" .. sub, { model = m, optimizer = opt, step = stepno, async = true })
  T.ok(ok, "the async save returned (the fault was in the writer thread): " .. tostring(err))
end

local function no_incomplete(sub)
  lab.dist.barrier()
  for _, n in ipairs(C.list_dir(dir .. "/" .. sub) or {}) do
    T.ok(not n:match("incomplete"), "left behind: " .. n)
  end
end

T.test("a writer-thread failure on one rank raises at wait() on every rank; the previous checkpoint stays", function()
  local m, opt = fresh()
  step(m, opt, 1)
  local kept = state_of(m, opt)
  lab.ckpt.save(dir .. "/fail", { model = m, optimizer = opt, step = 1 })
  step(m, opt, 2)
  failed_async_save(m, opt, "fail", 2)
  T.raises(function() lab.ckpt.wait() end, "rank " .. r .. ": ckpt.save", "injected failure",
    r == failing and "operation " .. K or "rank " .. failing .. " failed", "previous checkpoint", "untouched")
  lab.ckpt.wait() -- nothing in flight any more: returns
  local b, bopt = fresh()
  T.eq(lab.ckpt.load(dir .. "/fail", { model = b, optimizer = bopt }).step, 1, "step 1 is still the latest")
  same_state(state_of(b, bopt), kept, "step 1's tensors")
  no_incomplete("fail")
end)

T.test("the failure surfaces at the next save too, which writes nothing; the one after works", function()
  local m, opt = fresh()
  lab.ckpt.save(dir .. "/next", { model = m, optimizer = opt, step = 1 })
  step(m, opt, 1)
  failed_async_save(m, opt, "next", 2)
  T.raises(function() lab.ckpt.save(dir .. "/next", { model = m, optimizer = opt, step = 3 }) end,
    "ckpt.save", "injected failure")
  local b, bopt = fresh()
  T.eq(lab.ckpt.load(dir .. "/next", { model = b, optimizer = bopt }).step, 1, "neither step 2 nor 3 landed")
  lab.ckpt.save(dir .. "/next", { model = m, optimizer = opt, step = 3, async = true })
  T.eq(lab.ckpt.load(dir .. "/next", { model = b, optimizer = bopt }).step, 3, "load waits for the save in flight")
  same_state(state_of(b, bopt), state_of(m, opt), "step 3's tensors")
  no_incomplete("next")
end)

T.test("a real I/O failure (the step directory moved away while the threads write) raises at wait everywhere", function()
  local m, opt = fresh()
  lab.ckpt.save(dir .. "/gone", { model = m, optimizer = opt, step = 1 })
  step(m, opt, 1)
  local p = lab.ckpt.save(dir .. "/gone", { model = m, optimizer = opt, step = 2, async = true })
  -- rank 0 takes the directory away: a thread that has not yet created its files gets ENOENT,
  -- one that has cannot rename them, and if every thread had already finished, rank 0's commit
  -- cannot rename the directory into place: a failure from the OS in every case
  if r == 0 then T.ok(os.rename(p .. ".incomplete", dir .. "/moved-away"), "moved the step directory") end
  T.raises(function() lab.ckpt.wait() end, "rank " .. r .. ": ckpt.save", "No such file or directory")
  local b, bopt = fresh()
  T.eq(lab.ckpt.load(dir .. "/gone", { model = b, optimizer = bopt }).step, 1, "step 1 is still the latest")
end)

common.remove(dir)
T.finish()
