-- Benchmark: all_reduce (sum, f32, in place) through lab.dist, sizes 1 KiB .. 64 MiB.
-- Prints "bytes seconds-per-call" lines on rank 0 (the slowest rank's time); the driver
-- scripts/bench/allreduce.sh runs it beside the plain-MPI peer and makes the table.
local dist = lab.dist
local size = 1024
while size <= 64 * 1024 * 1024 do
  local reps = math.max(5, math.min(200, (256 * 1024 * 1024) // (size * 8)))
  local x = lab.zeros(size // 4)
  dist.all_reduce(x) -- warm-up
  dist.barrier()
  local t0 = lab.clock()
  for _ = 1, reps do dist.all_reduce(x) end
  local t = lab.tensor({ (lab.clock() - t0) / reps }, { dtype = "f64" })
  dist.all_reduce(t, "max")
  lab.print0(string.format("%d %.9f", size, t[1]))
  x:close()
  size = size * 4
end
