-- Crash safety of asynchronous saves at several ranks: a child job of 2 or 4 ranks saves step 1,
-- starts an async save of step 2 and trains on while one rank's writer thread dies at its file
-- operation K (before any byte, half-way through a file, before the rename, after the last
-- fsync). The job dies (mpirun ends every rank); the directory must then load step 1 with
-- step 1's parameters and moments (the step directory of step 2 was never put in place, since
-- the commit after the threads finish never ran). K past the thread's work must survive and
-- load step 2. (Every operation of one rank, sync and async: test_ckpt_crash.lua.)
local here = arg[0]:match("(.*/)") or "./"
local exe = arg[-1]
local child = here .. "ckpt_async_kill_child.lua"
local failures = 0
local function check(cond, msg)
  if not cond then
    failures = failures + 1
    io.stderr:write("FAIL " .. msg .. "\n")
  end
end

local H = dofile(here .. "ckpt_crash_model.lua")
local expected = {}
do
  local m, opt = H.model()
  for s = 1, 2 do
    H.step(m, opt, s)
    local t = {}
    for i, p in ipairs(m:parameters()) do t[#t + 1] = p:clone() t[#t + 1] = opt.state[i].m:clone() t[#t + 1] = opt.state[i].v:clone() end
    expected[s] = t
  end
end

local root = io.popen("mktemp -d /tmp/llmlab-ckpt-async-kill-XXXXXXXX"):read("l")
-- a rank's writer thread writes its safetensors file (6 operations: create, write, write
-- half-way, fsync, rename, fsync of the directory) and its JSON index (5: a one-piece file has
-- no half-way point): 1 = before any byte, 3 = a torn safetensors file, 5 = before its rename,
-- 11 = the index's last fsync; at 12 the thread has finished
local cases = { { 2, 1 }, { 2, 3 }, { 2, 5 }, { 2, 11 }, { 4, 3 }, { 2, 12 } }
for _, c in ipairs(cases) do
  local n, k = c[1], c[2]
  local dir = string.format("%s/np%d-k%d", root, n, k)
  -- this process runs under mpirun -n 1: the child job must not inherit its OMPI_/PMIX_
  -- variables, or each of its ranks would join this job's world of one as rank 0
  local p = io.popen(string.format("env $(env | awk -F= '/^(OMPI|PMIX)_/ {printf \"-u %%s \", $1}') "
    .. "'%s' -n %d '%s' '%s' %d 2>&1; echo \"status $?\"", exe, n, child, dir, k))
  local out = p:read("a")
  p:close()
  local status = tonumber(out:match("status (%d+)%s*$"))
  local survived = out:find("survived", 1, true) ~= nil
  local crashed = out:match("crash point %d+: ([^\n]*)")
  if k <= 11 then
    check(crashed and status ~= 0, string.format("np%d K=%d: the child did not die at a crash point:\n%s", n, k, out))
  else
    check(survived and status == 0, string.format("np%d K=%d: the save did not complete:\n%s", n, k, out))
  end
  local m, opt = H.model()
  local ok, st = pcall(lab.ckpt.load, dir, { model = m, optimizer = opt })
  local want = survived and 2 or 1
  check(ok, string.format("np%d K=%d: no loadable checkpoint: %s", n, k, tostring(st)))
  if ok then
    check(st.step == want, string.format("np%d K=%d: loaded step %d, want %d", n, k, st.step, want))
    local got = {}
    for i, q in ipairs(m:parameters()) do got[#got + 1] = q got[#got + 1] = opt.state[i].m got[#got + 1] = opt.state[i].v end
    for i, t in ipairs(expected[want]) do
      check(lab.max_abs_diff(got[i], t) == 0, string.format("np%d K=%d: tensor %d differs from step %d", n, k, i, want))
    end
  end
  print(string.format("%d ranks, K=%d: %s -> loads step %s", n, k, crashed or "no crash", ok and st.step or "none"))
end
os.execute("rm -rf '" .. root .. "'")
print(string.format("%d cases, %d failures", #cases, failures))
if failures > 0 then error(failures .. " async crash-safety failures") end
