-- Issue 23, defect 5: lab.cuda.synchronize() with the default device left at cpu waits on this
-- rank's GPU (node rank mod GPUs, as torch.cuda.synchronize() waits on the current device), not
-- on GPU 0: on an 8-GPU node ranks 1-7 timed nothing and opened a context on GPU 0. Where no GPU
-- is, the sim plays CUDA (runtime/cuda's device over runtime/simrt, two devices); its counts
-- (lab.cuda.sim_counter "synchronize:N", "ready:N") show which device waited and which were
-- set up. At 2 ranks on one node, default device cpu (no --device sim).
-- Run: build/llmlab -n 2 tests/sim/test_cuda_sync.lua (ctest: sim.test_cuda_sync.np2)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
local r, n = lab.dist.rank(), lab.dist.world()
local c = lab.cuda.sim_counter

T.test("with a cpu default, lab.cuda.synchronize() waits on this rank's device only", function()
  T.eq(lab.default_device(), "cpu", "the default device")
  T.eq(n, 2, "2 ranks")
  local mine, other = r, 1 - r
  local s_mine, s_other = c("synchronize:" .. mine), c("synchronize:" .. other)
  lab.cuda.synchronize()
  T.eq(c("synchronize:" .. mine) - s_mine, 1, "rank " .. r .. ": device " .. mine .. " waited")
  T.eq(c("synchronize:" .. other) - s_other, 0, "rank " .. r .. ": device " .. other .. " did not")
  T.eq(c("ready:" .. other), 0, "rank " .. r .. ": device " .. other .. " never set up (no context opened there)")
  T.eq(c("ready:" .. mine), 1, "rank " .. r .. ": its own device set up")
end)

T.test("lab.cuda.synchronize(dev) waits on the device named; a device that does not exist is an error", function()
  local x = lab.ones(8, { device = "sim:" .. r })
  local s = c("synchronize:" .. r)
  lab.cuda.synchronize("sim:" .. r)
  T.eq(c("synchronize:" .. r) - s, 1, "sim:" .. r .. " waited")
  T.eq(x:sum():item(), 8, "its work ran")
  local ok, err = pcall(lab.cuda.synchronize, "sim:7")
  T.ok(not ok and tostring(err):find("rank " .. r, 1, true) and tostring(err):find("sim:7", 1, true),
    "names the rank and the device: " .. tostring(err))
end)

T.finish()
