-- Which communicator a collective takes (lab.dist.backend): cpu tensors go to MPI on every
-- group; sim tensors take nccl.c over the sim's NCCL on MPI where the build has the SIMT
-- interpreter (runtime/simrt), else stage through host memory; a rank outside a
-- group is told so. Cuda tensors (NCCL where every rank has a GPU of its own, MPI staging where
-- ranks share one) are checked in tests/gpu; the choice itself is unit-tested in unit.devcomm.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local dist = lab.dist
local n, me = dist.world(), dist.rank()

T.test("cpu tensors take MPI on the world and on a group", function()
  T.eq(dist.backend(lab.ones(4)), "mpi")
  local g = dist.new_group({ 0 })
  if me == 0 then T.eq(dist.backend(lab.ones(4), { group = g }), "mpi")
  else
    local b = dist.backend(lab.ones(4), { group = g })
    T.ok(b:find("^none: this rank is not a member of group%d+%[0%]$"), b)
  end
end)

T.test("sim tensors take the sim's NCCL (or stage without one), and the collective is right", function()
  local t = lab.full({ 3 }, me + 1, { device = "sim" })
  local b = dist.backend(t)
  T.ok(b:find("^nccl %(sim:0%)$") or b:find("^mpi, staged through host memory: collectives on sim tensors stage here"), b)
  dist.all_reduce(t)
  T.values(t:cpu(), { n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2 }, 0, "sum of 1..n")
end)

T.test("backend checks its arguments", function()
  T.raises(function() dist.backend(3) end, "tensor")
  T.raises(function() dist.backend(lab.ones(2), { group = 5 }) end, "process group")
end)

T.finish()
