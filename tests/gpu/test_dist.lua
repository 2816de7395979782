-- Collectives on GPU tensors at any world size, checked against closed forms of rank arithmetic
-- (x_r = r + 1 on rank r: sum n(n+1)/2, max n, min 1, prod n!). At a world of 1 with a GPU they
-- go through NCCL (lab.dist.backend says "nccl (cuda:0)"): that runs every NCCL call of
-- runtime/dist/nccl.c and the ordering of its stream against the compute stream (a kernel
-- writes the tensor just before the collective and another reads it just after, on 8M
-- elements so a missing wait shows). At 2 ranks on one GPU they stage through MPI (NCCL
-- refuses duplicate GPUs) and the backend names the shared GPU. ctest runs it at 1 and 2 ranks.
-- LLMLAB_GPU_TEST_DEVICE=sim checks this script's logic on a CPU machine, through nccl.c over the
-- sim's NCCL on MPI (runtime/simrt/nccl_mpi.c; the staged path in a build without the interpreter).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local G = require("gpu_common")
G.require_gpu()
local dist = lab.dist
local r, n = dist.rank(), dist.world()
local dev = G.dev
local failures = 0
local function check(cond, what)
  if not cond then
    failures = failures + 1
    print(string.format("rank %d: FAIL %s", r, what))
  end
end
local function fact(k) local p = 1 for i = 2, k do p = p * i end return p end
local function all_equal(t, want, what)
  local h = t:cpu():to("f64")
  local err = (h - want):abs():max():item()
  check(err == 0, what .. string.format(" (max error %g)", err))
end

-- which communicator
local b = dist.backend(lab.ones(1, { device = dev }))
print(string.format("rank %d of %d: backend for %s tensors: %s", r, n, dev, b))
if dev == "sim" then check(b == "nccl (sim:0)" or b:find("^mpi, staged"), "sim: the sim's NCCL, or staged without one")
elseif n == 1 then check(b == "nccl (cuda:0)", "a world of 1 with a GPU takes NCCL")
else check(b:find("share GPU") ~= nil or b == "nccl (cuda:0)", "ranks sharing a GPU stage, naming it") end

-- all_reduce: every op and dtype
for _, dt in ipairs({ "f32", "f64", "i32", "i64", "bf16", "f16" }) do
  for _, case in ipairs({ { "sum", n * (n + 1) / 2 }, { "max", n }, { "min", 1 }, { "prod", fact(n) } }) do
    local x = lab.full({ 1001 }, r + 1, { dtype = dt, device = dev })
    dist.all_reduce(x, case[1])
    all_equal(x, case[2], "all_reduce " .. case[1] .. " " .. dt)
  end
end
local a = lab.full({ 7 }, r + 1.0, { device = dev })
dist.all_reduce(a, { op = "avg" })
all_equal(a, (n + 1) / 2, "all_reduce avg")

-- ordering: written by a kernel just before, read by a kernel just after
local N = dev == "sim" and 256 * 1024 or 8 * 1024 * 1024 -- the sim device checks the logic only
local big = lab.ones(N, { device = dev }) * (r + 1) -- a kernel on the compute stream
dist.all_reduce(big)
local after = big * 2 -- must see the reduced values
all_equal(after, n * (n + 1), "compute stream ordered around the collective (8M elements)")
local big2 = lab.ones(N, { device = dev }) * (r + 1)
local h = dist.all_reduce(big2, { async = true })
h:wait() -- the compute stream waits for the collective
all_equal(big2 + 0, n * (n + 1) / 2, "async all_reduce, then a kernel after wait()")

-- broadcast and reduce from every root
for root = 0, n - 1 do
  local x = lab.full({ 5 }, r * 10.0, { device = dev })
  dist.broadcast(x, root)
  all_equal(x, root * 10, "broadcast from " .. root)
  local y = lab.full({ 3 }, r + 1.0, { device = dev, dtype = "bf16" })
  dist.reduce(y, root)
  all_equal(y, r == root and n * (n + 1) / 2 or r + 1, "bf16 reduce to " .. root)
end

-- all_gather, reduce_scatter, all_to_all, all_to_all_single
local x = lab.full({ 3 }, r * 1.0, { device = dev, dtype = "f16" })
local flat = lab.zeros(3 * n, { device = dev, dtype = "f16" })
dist.all_gather_into_tensor(flat, x)
local want = {}
for q = 0, n - 1 do for _ = 1, 3 do want[#want + 1] = q end end
all_equal(flat, lab.tensor(want, { dtype = "f64" }), "f16 all_gather")
local input = lab.arange(1, 2 * n + 1, { device = dev, dtype = "f32" }) * (r + 1)
local out = lab.zeros(2, { device = dev })
dist.reduce_scatter(out, input)
local s = n * (n + 1) / 2
all_equal(out, lab.tensor({ (2 * r + 1) * s, (2 * r + 2) * s }, { dtype = "f64" }), "reduce_scatter")
local blocks = lab.zeros(n, 2)
for q = 1, n do blocks[q] = 100 * r + (q - 1) end
local a2a = lab.zeros(n, 2, { device = dev })
dist.all_to_all(a2a, blocks:to(dev))
local expect = lab.zeros(n, 2, { dtype = "f64" })
for q = 1, n do expect[q] = 100 * (q - 1) + r end
all_equal(a2a, expect, "all_to_all")
-- uneven: rank r sends q + 1 rows to rank q; receives r + 1 rows from each
local in_splits, out_splits, rows = {}, {}, 0
for q = 0, n - 1 do in_splits[q + 1] = q + 1; out_splits[q + 1] = r + 1; rows = rows + q + 1 end
local src = lab.full({ rows, 2 }, r * 1.0, { device = dev })
local dst = lab.zeros((r + 1) * n, 2, { device = dev })
dist.all_to_all_single(dst, src, { output_split_sizes = out_splits, input_split_sizes = in_splits })
local e2 = lab.zeros((r + 1) * n, 2, { dtype = "f64" })
for q = 0, n - 1 do for k = 1, r + 1 do e2[q * (r + 1) + k] = q end end
all_equal(dst, e2, "all_to_all_single with uneven splits")

-- send/recv around a ring (n > 1)
if n > 1 then
  local right, left = (r + 1) % n, (r - 1 + n) % n
  local msg, got = lab.full({ 4 }, r * 1.0, { device = dev }), lab.zeros(4, { device = dev })
  local hs = dist.isend(msg, right, { tag = 3 })
  local hr = dist.irecv(got, left, { tag = 3 })
  hr:wait()
  hs:wait()
  all_equal(got, left, "isend/irecv ring")
end

local total = lab.tensor({ failures })
dist.all_reduce(total)
if total[1] > 0 then
  print(string.format("rank %d: %d failures over all ranks", r, total[1]))
  os.exit(1)
end
print(string.format("rank %d: GPU collectives on %s ok", r, b))
