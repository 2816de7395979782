-- The child of test_ckpt_async_kill.lua, run at N ranks: saves step 1 of ckpt_crash_model.lua's
-- model (replicated: every rank the same), takes a step, then on the last rank arms a crash at
-- file operation K of the asynchronous save of step 2, which on that rank (not rank 0) are all
-- its writer thread's. Training goes on while the thread writes; the rank dies at operation K
-- (_exit, as kill -9) and mpirun ends the job. "survived" means K was past the thread's work.
--   llmlab -n N ckpt_async_kill_child.lua DIR K
local dir, k = arg[1], tonumber(arg[2])
local H = dofile((arg[0]:match("(.*/)") or "./") .. "ckpt_crash_model.lua")
local m, opt = H.model()
H.step(m, opt, 1)
lab.ckpt.save(dir, { model = m, optimizer = opt, step = 1 })
H.step(m, opt, 2)
if lab.dist.rank() == lab.dist.world_size() - 1 then lab._ckpt.fault(k, "exit") end
lab.ckpt.save(dir, { model = m, optimizer = opt, step = 2, async = true })
H.step(m, opt, 3) -- training continues during the write
lab.ckpt.wait()
if lab.dist.rank() == lab.dist.world_size() - 1 then
  print("survived: the writer thread did " .. lab._ckpt.fault_count() .. " file operations")
end
