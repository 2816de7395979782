-- Crash safety, proven at every file operation of a save: a child process saves step 1, then
-- dies (_exit, as kill -9) at file operation K of the save of step 2, for K = 1, 2, ... until
-- a save survives. After each crash the checkpoint directory must load, and hold exactly step 1
-- (crash before `latest` moved) or step 2 (after), with that step's parameters and moments; a
-- next save into the same directory must work too. Both synchronous and asynchronous saves.
local here = arg[0]:match("(.*/)") or "./"
local exe = arg[-1]
local child = here .. "ckpt_crash_child.lua"
local C = lab._ckpt
local failures, points = 0, 0

local function check(cond, msg)
  if not cond then
    failures = failures + 1
    io.stderr:write("FAIL " .. msg .. "\n")
  end
end

-- the states the child saves, computed here the same way
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

local root = io.popen("mktemp -d /tmp/llmlab-ckpt-crash-XXXXXXXX"):read("l")
-- async saves run the same operations; those of the writer thread (the files inside the
-- .incomplete directory) are tried again with the thread doing them
local sync_ops = {}
for _, mode in ipairs({ "sync", "async" }) do
  local latest_moved = false
  for k = 1, 200 do
    local skip = mode == "async" and sync_ops[k] and not (sync_ops[k]:match("%.incomplete/")
      or sync_ops[k]:match("^fsync directory .*%.incomplete$"))
    if skip and sync_ops[k]:match("^rename .*/latest$") then latest_moved = true end
    if not skip then
    local dir = string.format("%s/%s-%d", root, mode, k)
    local p = io.popen(string.format("'%s' '%s' '%s' %d %s 2>&1; echo \"status $?\"", exe, child, dir, k, mode))
    local out = p:read("a")
    p:close()
    local status = tonumber(out:match("status (%d+)%s*$"))
    if out:find("survived", 1, true) then
      check(status == 0, mode .. " K=" .. k .. ": survived but exited with " .. tostring(status))
      check(latest_moved, mode .. ": no crash point was the rename of latest")
      print(string.format("%s: with K = %d the save completed (%s)", mode, k, out:match("survived: ([^\n]*)")))
      break
    end
    local op = out:match("crash point %d+: ([^\n]*)")
    check(status == 86 and op ~= nil, mode .. " K=" .. k .. ": the child did not die at a crash point:\n" .. out)
    if not op then break end
    points = points + 1
    -- the loader must find the last complete step
    local m, opt = H.model()
    local ok, st = pcall(lab.ckpt.load, dir, { model = m, optimizer = opt })
    local want = latest_moved and 2 or 1
    check(ok, string.format("%s K=%d (%s): no loadable checkpoint: %s", mode, k, op, tostring(st)))
    if ok then
      check(st.step == want, string.format("%s K=%d (%s): loaded step %d, want %d", mode, k, op, st.step, want))
      local got = {}
      for i, q in ipairs(m:parameters()) do got[#got + 1] = q got[#got + 1] = opt.state[i].m got[#got + 1] = opt.state[i].v end
      for i, t in ipairs(expected[st.step]) do
        check(lab.max_abs_diff(got[i], t) == 0, string.format("%s K=%d: tensor %d differs from step %d", mode, k, i, st.step))
      end
      -- and the directory takes the next save
      local sok, serr = pcall(lab.ckpt.save, dir, { model = m, optimizer = opt, step = 3 })
      check(sok, string.format("%s K=%d: the next save failed: %s", mode, k, tostring(serr)))
      check(sok and lab.ckpt.load(dir, { model = m, optimizer = opt }).step == 3, mode .. " K=" .. k .. ": step 3 not loaded")
    end
    if op:match("^rename .*/latest$") then latest_moved = true end
    if mode == "sync" then sync_ops[k] = op:gsub("/sync%-%d+/", "/") end
    print(string.format("%s K=%d: crashed at %s -> loads step %s", mode, k, op, ok and st.step or "none"))
    end
  end
end
os.execute("rm -rf '" .. root .. "'")
print(string.format("%d crash points tried, %d failures", points, failures))
if failures > 0 then error(failures .. " crash-safety failures") end
