-- Lab 01: from init to all_reduce.
--
-- What it shows: how a job of N processes (ranks) is started, what rank, local_rank and
-- world mean, and what all_reduce computes, checked against the closed form for every
-- reduction op. Run it with
--     scripts/llmlab -n 4 scripts/labs/01_allreduce.lua
-- or  mpirun -np 4 build/llmlab scripts/labs/01_allreduce.lua   (as root add --allow-run-as-root)
--
-- rank vs local_rank. `rank` numbers the processes of the whole job, 0..world-1, across all
-- machines. `local_rank` numbers the processes on this machine only, 0..local_world-1. Use
-- rank to decide who does what in the algorithm (who prints, which data shard to read);
-- use local_rank to pick a device on this machine (GPU local_rank of this node). On one
-- machine the two are equal; on two machines of 8 GPUs, rank 9 is local_rank 1 on the
-- second machine.
--
-- The lab ends by printing the first troubleshooting steps (section 5).

local dist = lab.dist
local rank, world = dist.rank(), dist.world()

local check, finish = lab.checker(58)

lab.print0("== Lab 01: from init to all_reduce ==")
lab.print0(string.format("world = %d ranks, %d threads per rank", world, lab.threads()))
dist.print_ranks(string.format("rank %d of %d, local_rank %d of %d on %s, pid %d", rank, world,
  dist.local_rank(), dist.local_world(), dist.hostname(), tonumber(io.open("/proc/self/stat"):read("n"))))

-- Step 1: the smallest possible check that the ranks can talk at all.
lab.print0("\n1. A tiny all_reduce first: every rank contributes 1")
local one = lab.ones(1)
dist.all_reduce(one)
check("ones(1) sums to world = " .. world, one[1] == world)

-- Step 2: a rank-dependent tensor. Rank r holds x_r = (r + 1) * [1, 2, 3, 4]. After a sum
-- all_reduce every rank holds sum_r (r + 1) * [1..4] = world (world + 1) / 2 * [1..4].
lab.print0("\n2. all_reduce(sum) of x_r = (r + 1) * [1, 2, 3, 4]")
local x = lab.arange(1, 5, { dtype = "f32" }) * (rank + 1)
dist.print_ranks("before: " .. table.concat(x:tolist(), " "))
dist.all_reduce(x)
dist.print_ranks("after:  " .. table.concat(x:tolist(), " "))
local s = world * (world + 1) / 2
local closed = lab.arange(1, 5, { dtype = "f32" }) * s
check(string.format("equals world(world+1)/2 * [1..4] = %g * [1..4]", s), lab.allclose(x, closed, 0, 0))

-- Step 3: every reduction op, with its closed form over x_r = r + 1.
lab.print0("\n3. Each reduction op on x_r = r + 1")
local fact = 1
for k = 2, world do fact = fact * k end
local cases = { -- an ordered list: every rank must run the ops in the same order
  { "sum", s, "world(world+1)/2" },
  { "avg", (world + 1) / 2, "(world+1)/2" },
  { "max", world, "world" },
  { "min", 1, "1" },
  { "prod", fact, "world!" },
}
for _, c in ipairs(cases) do
  local op, want, formula = c[1], c[2], c[3]
  local t = lab.full({ 3 }, rank + 1.0)
  dist.all_reduce(t, op)
  check(string.format("%-4s -> %-8g (%s)", op, t[1], formula), math.abs(t[1] - want) < 1e-6)
end

-- Step 4: all_reduce works in place on the tensor, and returns it: nothing is allocated,
-- which is what lets DDP reduce gradients where they live.
lab.print0("\n4. In place")
local g = lab.full({ 2 }, 1.0)
local same = dist.all_reduce(g)
check("the result is the same tensor object", same == g)

-- What went over the wire: lab.dist.stats() counts each call and its payload as it runs;
-- a ring all-reduce then sends 2(n-1)/n of the payload per rank, and stats() reports that
-- product as wire_bytes: a formula, not a measurement of the network.
local st = dist.stats().world.all_reduce
lab.print0(string.format("\nall_reduce calls on this rank: %d, payload %s (counted); wire bytes under a ring,",
  st.calls, lab.format_bytes(st.bytes)))
lab.print0(string.format("2(n-1)/n of the payload: %s (formula)", lab.format_bytes(st.wire_bytes)))

-- 5. When a job does not behave: the first steps, in order.
lab.print0("\n5. First troubleshooting steps, in order:")
for i, step in ipairs({
  "A hang: a rank that skips a collective hangs every other rank in it. Every rank must call the\n" ..
  "      same collectives in the same order with the same sizes (watch `if rank == 0` around a\n" ..
  "      collective, and iterating a table with pairs(): its order can differ from rank to rank).\n" ..
  "      Run with --check-collectives to get an error naming each rank's call instead of a hang.",
  "mpirun refuses to start as root: add --allow-run-as-root (llmlab -n adds it).",
  "mpirun refuses more ranks than cores: add --oversubscribe (llmlab -n adds it); expect it to be\n" ..
  "      slower, since ranks share cores and each rank uses cores/ranks threads.",
  "When in doubt, check the communicator with a tiny all_reduce first, as step 1 did: if\n" ..
  "      ones(1) does not sum to `world`, nothing bigger will work.",
}) do lab.print0(string.format("   %d. %s", i, step)) end

finish("lab 01")
