-- The child of test_ckpt_crash.lua: saves step 1 of a small model, takes a step, arms a crash at
-- file operation K of the next save and saves step 2 (sync or async). The process dies at that
-- operation (_exit, as kill -9 would); "survived" means K was past the save's last operation.
--   llmlab ckpt_crash_child.lua DIR K sync|async
local dir, k, mode = arg[1], tonumber(arg[2]), arg[3]
local H = dofile((arg[0]:match("(.*/)") or "./") .. "ckpt_crash_model.lua")
local m, opt = H.model()
H.step(m, opt, 1)
lab.ckpt.save(dir, { model = m, optimizer = opt, step = 1 })
H.step(m, opt, 2)
lab._ckpt.fault(k, "exit")
lab.ckpt.save(dir, { model = m, optimizer = opt, step = 2, async = mode == "async" })
lab.ckpt.wait()
print("survived: the save has " .. lab._ckpt.fault_count() .. " file operations")
