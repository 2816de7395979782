-- Runs one Lua test of tests/lua with GPU tensors by default (the test given as the first
-- argument, at whatever world size mpirun gives): DDP, ZeRO, TP, PP, amp and the collectives
-- take the same equivalence tests on cuda as on the cpu. At a world of 1 their collectives go
-- through NCCL; at 2 ranks on one GPU through MPI staging (NCCL refuses duplicate GPUs).
-- Exits 77 without a GPU; LLMLAB_GPU_TEST_DEVICE=sim runs the wrapper itself on a CPU machine.
-- With LLMLAB_GPU_TEST_PLACE=1 the models are built on the cpu and moved instead.
--   llmlab -n 2 tests/gpu/on_gpu.lua tests/lua/test_ddp_zero.lua
local here = arg[0]:match("(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local G = require("gpu_common")
G.require_gpu()
local target = arg[1] or error("on_gpu: give the test to run, e.g. tests/lua/test_ddp_zero.lua")
-- LLMLAB_GPU_TEST_PLACE=1: the default device stays cpu and the test moves its models and
-- data with :to(G.dev) (tests/lua/harness.lua's placement option), PyTorch's model.to('cuda')
if os.getenv("LLMLAB_GPU_TEST_PLACE") == "1" then LLMLAB_TEST_PLACE = G.dev else lab.set_default_device(G.dev) end
lab.print0(string.format("on_gpu: %s on %s, backend: %s", target, lab.default_device(),
  lab.dist.backend(lab.ones(1))))
-- the test sees itself as the script being run
arg[0] = target
table.remove(arg, 1)
dofile(target)
