-- Kernels are stream work on the sim (runtime/simrt/launch.c), as on a GPU: a kernel runs when
-- its stream's worker reaches it, so other stream work that does not wait for it reads what was
-- there before. Each step writes y = x * k (a kernel on the compute stream) and all-reduces it
-- (nccl.c: the NCCL stream waits for the compute stream's event) at 2 ranks; every value must be
-- 2 k. With LLMLAB_SIMRT_DROP_WAITS=1 (every cudaStreamWaitEvent a no-op: the planted bug of a
-- missing stream wait) and LLMLAB_SIMRT_DELAY_US=2000 (every item late), and the argument
-- `stale`, the test passes only if some value is wrong: the missing wait is seen as stale data.
-- When kernels ran on the host at the launch (after draining their stream), that mutant
-- read every value right.
-- The default device stays cpu, so the harness's own all_reduce of the verdict takes MPI, not
-- the mutant's NCCL. Run: build/llmlab -n 2 tests/sim/test_stream_order.lua [stale]
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
local expect_stale = arg[1] == "stale"

T.test("a kernel's result reaches the all_reduce that follows it " ..
       (expect_stale and "only through the stream wait (dropped: stale)" or "(every value)"), function()
  T.eq(lab.dist.world(), 2, "run at 2 ranks")
  local x = lab.ones(4096, { device = "sim" })
  local c0 = lab.cuda.sim_nccl_calls()
  local wrong, worst = 0, 0
  for k = 1, 6 do
    local y = x * k
    lab.dist.all_reduce(y)
    local err = (y:to("cpu") - 2 * k):abs():max():item()
    if err ~= 0 then wrong = wrong + 1 end
    worst = math.max(worst, err)
  end
  T.eq(lab.cuda.sim_nccl_calls() - c0, 6, "every all_reduce went through the sim's NCCL")
  if expect_stale then
    T.ok(wrong > 0, string.format("the missing stream wait shows: %d of 6 steps wrong (max |err| %g)", wrong, worst))
  else
    T.eq(wrong, 0, string.format("steps wrong (max |err| %g)", worst))
  end
end)

T.finish()
