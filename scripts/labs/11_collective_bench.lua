-- Lab 11: benchmarking collectives, and what to tune.
--
-- What it shows: how to measure a collective the way nccl-tests does and read the result.
-- For all_reduce, all_gather, reduce_scatter and broadcast over sizes from 4 KiB to 16 MiB
-- it times many calls (after a warm-up, the slowest rank's time, best of 3 rounds), and reports
--   algbw = bytes / time              (what the caller sees)
--   busbw = algbw * factor            (what each link carried: all_reduce 2(n-1)/n,
--                                      all_gather and reduce_scatter (n-1)/n, broadcast 1)
-- busbw is comparable across collectives and rank counts, and against the hardware's link
-- bandwidth; a chart draws busbw against size per collective, as nccl-tests users plot it. Then it fits the alpha-beta model t = alpha + bytes * beta to the all_reduce
-- times (least squares on the relative error): alpha is the per-call latency, 1/beta the bandwidth, and alpha/beta the size below
-- which a collective is latency-bound (why DDP buckets gradients to ~25 MB).
-- Here the collectives are MPI over shared memory between CPU ranks; on GPUs the same
-- calls go to NCCL where each rank has a GPU of its own, and section 3 sweeps NCCL's
-- algorithm and protocol there (it says why it cannot where there is one GPU, or none).
--   scripts/llmlab -n 4 scripts/labs/11_collective_bench.lua
local dist = lab.dist
local rank, n = dist.rank(), dist.world()
local check, finish = lab.checker(64)
lab.print0(string.format("== Lab 11: collective benchmarks, %d ranks ==", n))

-- seconds per call, the slowest rank's (a collective is as fast as its last rank), in the
-- best of 3 rounds: on shared cores a round can lose its time slice to other work, and the
-- best round is the one that measured the collective.
local function time_it(fn, bytes)
  local reps = math.max(2, math.min(40, (32 * 1024 * 1024) // (bytes * 4)))
  fn() -- warm-up: connections, buffers
  local rounds = lab.zeros(3, { dtype = "f64" })
  for r = 1, 3 do
    dist.barrier()
    local t0 = lab.clock()
    for _ = 1, reps do fn() end
    rounds[r] = (lab.clock() - t0) / reps
  end
  dist.all_reduce(rounds, { op = "max" })
  return rounds:min():item()
end

-- each collective: the call on a buffer of about `bytes` (the size nccl-tests reports) and its
-- busbw factor. make(bytes) returns the call and the bytes it really moves: all_gather and
-- reduce_scatter split the buffer into n equal parts, so, as nccl-tests does, the element
-- count is rounded down to a multiple of n (4 MiB on 3 ranks is 3 x 349525 floats).
local collectives = {
  { name = "all_reduce", factor = 2 * (n - 1) / n, make = function(bytes)
    local x = lab.zeros(bytes // 4)
    return function() dist.all_reduce(x) end, bytes
  end },
  { name = "all_gather", factor = (n - 1) / n, make = function(bytes)
    local part = bytes // 4 // n
    local out, mine = lab.zeros(part * n), lab.zeros(part)
    return function() dist.all_gather_into_tensor(out, mine) end, part * n * 4
  end },
  { name = "reduce_scatter", factor = (n - 1) / n, make = function(bytes)
    local part = bytes // 4 // n
    local inp, out = lab.zeros(part * n), lab.zeros(part)
    return function() dist.reduce_scatter_tensor(out, inp) end, part * n * 4
  end },
  { name = "broadcast", factor = 1, make = function(bytes)
    local x = lab.zeros(bytes // 4)
    return function() dist.broadcast(x, 0) end, bytes
  end },
}

local sizes = {}
for k = 12, 24, 2 do sizes[#sizes + 1] = 1 << k end -- 4 KiB .. 16 MiB
local results = {}
local over, ranks_here, cores = dist.oversubscribed()
lab.print0(string.format("\n1. Time and bandwidth (slowest rank; GB/s = 1e9 bytes/s):"))
if over then
  lab.print0(string.format("   (%d ranks share %d cores: a call waits for ranks that are not running, so these times", ranks_here,
    cores))
  lab.print0("   measure the turns on the cores as much as the copies; compare sizes, not machines)")
end
lab.print0(string.format("   %-15s %10s %12s %10s %10s", "collective", "bytes", "time (us)", "algbw", "busbw"))
local curves = {} -- busbw against the bytes moved, a series per collective, as nccl-tests users plot it
for _, c in ipairs(collectives) do
  results[c.name] = {}
  local curve = { name = c.name, x = {}, y = {} }
  for _, bytes in ipairs(sizes) do
    local call, moved = c.make(bytes)
    local t = time_it(call, moved)
    local algbw = moved / t / 1e9
    results[c.name][bytes] = t
    lab.print0(string.format("   %-15s %10s %12.1f %10.2f %10.2f", c.name, lab.format_bytes(moved), t * 1e6, algbw,
      algbw * c.factor))
    curve.x[#curve.x + 1], curve.y[#curve.y + 1] = moved, algbw * c.factor
  end
  curves[#curves + 1] = curve
  collectgarbage()
end
if rank == 0 then
  lab.plot.line(curves, { title = "busbw (GB/s) vs bytes, slowest rank" .. (n == 1 and " (one rank: no link, busbw 0)" or ""),
    xlabel = "bytes", logx = true, xfmt = "bytes", ymin = 0, height = 10 })
end

-- 2. The alpha-beta model for all_reduce, fitted by least squares up to 1 MiB: beyond that,
-- on CPU ranks, the buffers fall out of cache and ranks share cores, and the line bends
local xs, ys = {}, {}
for _, bytes in ipairs(sizes) do
  if bytes <= 1 << 20 then xs[#xs + 1], ys[#ys + 1] = bytes, results.all_reduce[bytes] end
end
-- weighted by 1/t^2, so the fit minimises the relative miss at every size (plain least
-- squares would fit the largest sizes and ignore the latency at the small ones)
local sw, swx, swxx, swy, swxy = 0, 0, 0, 0, 0
for i = 1, #xs do
  local w = 1 / ys[i] ^ 2
  sw, swx, swxx, swy, swxy = sw + w, swx + w * xs[i], swxx + w * xs[i] ^ 2, swy + w * ys[i], swxy + w * xs[i] * ys[i]
end
local det = sw * swxx - swx * swx
local beta = (sw * swxy - swx * swy) / det
local alpha = (swxx * swy - swx * swxy) / det
lab.print0("\n2. all_reduce as t = alpha + bytes * beta (least squares, 4 KiB .. 1 MiB):")
if n > 1 then
  lab.print0(string.format("   alpha = %.1f us per call, 1/beta = %.2f GB/s, crossover alpha/beta = %s", alpha * 1e6,
    1 / beta / 1e9, lab.format_bytes(alpha / beta)))
else
  lab.print0("   (one rank: the collectives are copies, there is no link to model; run with -n 2 or more)")
end
lab.print0("   below the crossover a call costs mostly latency: many small all-reduces should be")
lab.print0("   bucketed into one (lab.ddp.wrap's bucket_mb; PyTorch DDP's 25 MB default)")
-- against the fastest of the three smallest sizes: one small size can lose its time slices
-- to other work on shared cores (a 4 KiB broadcast once measured 11 ms under load)
check("time grows with size (16 MiB slower than 4-64 KiB) for every collective", (function()
  for _, c in ipairs(collectives) do
    local r = results[c.name]
    if n > 1 and r[sizes[#sizes]] <= math.min(r[sizes[1]], r[sizes[2]], r[sizes[3]]) then return false end
  end
  return true
end)())
local worst_fit = 0
for i = 1, #xs do worst_fit = math.max(worst_fit, math.abs(alpha + beta * xs[i] - ys[i]) / ys[i]) end
lab.print0(string.format("   the line's largest miss over those sizes: %.0f%%", 100 * worst_fit))
check("a positive bandwidth term (beta > 0)", n == 1 or beta > 0)
-- bucketing, measured: 64 all-reduces of 16 KiB against one of 1 MiB
local small, big = lab.zeros(4096), lab.zeros(64 * 4096)
-- the two are timed in alternating rounds and each keeps its best round, so a burst of other work
-- on shared cores (a loaded CI machine) slows both sides alike instead of deciding the check
local t_small, t_big = math.huge, math.huge
for _ = 1, 3 do
  t_small = math.min(t_small, time_it(function() for _ = 1, 64 do dist.all_reduce(small) end end, 64 * 16384))
  t_big = math.min(t_big, time_it(function() dist.all_reduce(big) end, 64 * 16384))
end
lab.print0(string.format("   measured: 64 x 16 KiB all-reduces %.0f us, one 1 MiB all-reduce %.0f us (%.1fx)", t_small * 1e6,
  t_big * 1e6, t_small / t_big))
check("one bucket beats many small calls", n == 1 or t_small > t_big)

-- 3. What to tune on GPUs (NCCL): the knobs nccl-tests sweeps and what each one trades.
lab.print0("\n3. NCCL knobs (environment variables), swept with the same measurement where NCCL runs:")
for _, line in ipairs({
  "NCCL_DEBUG=INFO            print the chosen rings/trees, transports (NVLink, IB, sockets) and channels",
  "NCCL_ALGO=Ring|Tree|NVLS   ring: best bandwidth; tree: lower latency at scale; NVLS: NVSwitch reductions",
  "NCCL_PROTO=LL|LL128|Simple LL/LL128 cut latency for small messages; Simple reaches peak bandwidth",
  "NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS   more channels use more SMs and links for large messages",
  "NCCL_BUFFSIZE              per-channel staging buffer (default 4 MiB); larger can help big messages",
  "NCCL_IB_HCA / NCCL_SOCKET_IFNAME          pin the network interfaces; a wrong pick means TCP speeds",
}) do lab.print0("   " .. line) end
-- NCCL runs only where every rank drives a GPU of its own (it refuses two ranks on one GPU), and
-- its algorithm and protocol only matter where there are links between GPUs: more than one rank.
local gpus = lab.cuda.is_available() and lab.cuda.device_count() or 0
local backend = gpus > 0 and dist.backend(lab.ones(1, { device = "cuda" })) or nil
local nccl_here = backend ~= nil and backend:find("^nccl") ~= nil
local agree = lab.tensor({ nccl_here and 1 or 0 })
dist.all_reduce(agree, { op = "min" })
if agree[1] == 1 and n > 1 then
  -- NCCL_ALGO and NCCL_PROTO are read when a communicator is made: each setting gets a new group
  lab.print0(string.format("   sweep on %d GPUs (%s), all_reduce bf16, slowest rank:", n, backend))
  lab.print0(string.format("   %-7s %-7s %14s %14s %14s", "algo", "proto", "64 KiB busbw", "16 MiB busbw", "256 MiB busbw"))
  local results_ok = true
  for _, algo in ipairs({ "Ring", "Tree" }) do
    for _, proto in ipairs({ "LL", "LL128", "Simple" }) do
      dist.set_nccl_env("NCCL_ALGO", algo)
      dist.set_nccl_env("NCCL_PROTO", proto)
      local ranks = {}
      for q = 0, n - 1 do ranks[#ranks + 1] = q end
      local g = dist.new_group(ranks)
      local row = {}
      for _, bytes in ipairs({ 64 * 1024, 16 * 1024 * 1024, 256 * 1024 * 1024 }) do
        local x = lab.ones(bytes // 2, { dtype = "bf16", device = "cuda" })
        local t = time_it(function() dist.all_reduce(x, { group = g }); lab.cuda.synchronize() end, bytes)
        row[#row + 1] = string.format("%11.1f GB/s", bytes / t / 1e9 * 2 * (n - 1) / n)
        results_ok = results_ok and t > 0
      end
      lab.print0(string.format("   %-7s %-7s %s", algo, proto, table.concat(row, " ")))
    end
  end
  dist.set_nccl_env("NCCL_ALGO", nil)
  dist.set_nccl_env("NCCL_PROTO", nil)
  lab.print0("   NCCL_BUFFSIZE and the channel counts are read once per process: sweep them in separate runs,")
  lab.print0(string.format("   e.g. NCCL_MAX_NCHANNELS=4 llmlab -n %d scripts/bench/collectives.lua device=cuda d=bf16", n))
  check("every NCCL setting ran", results_ok)
else
  local why
  if gpus == 0 then
    why = "no GPU here: these collectives are MPI between CPU ranks, and the knobs act on nothing"
  elseif not nccl_here then
    why = "the ranks' GPU collectives do not take NCCL here: " .. backend
  else
    why = "one rank: an all_reduce on one GPU crosses no link, so algorithm and protocol have nothing to choose"
  end
  lab.print0("   not swept: " .. why .. ".")
  lab.print0("   Where each rank has its own GPU, this section sweeps NCCL_ALGO x NCCL_PROTO at 64 KiB, 16 MiB")
  lab.print0("   and 256 MiB; scripts/bench/collectives.lua device=cuda prints nccl-tests' table per setting.")
end
lab.print0("   Compare busbw at 1 GiB with the link (H100 NVLink 4: ~450 GB/s per direction per GPU);")
lab.print0("   nccl-tests' all_reduce_perf reports the same algbw and busbw columns as section 1.")
-- 4. The network beyond this machine: lab.netsim (lua/lab/netsim.lua says the model and cites
-- its figures). First this machine, as the model sees it from section 2's fit, predicting the
-- sizes the fit did not use; then a DGX H100 cluster against published nccl-tests figures;
-- then 10,000 GPUs, where ECMP collisions and one paused link set the pace of everything.
local ns = lab.netsim
lab.print0("\n4. lab.netsim: ring and tree all-reduce on a described cluster")
if n > 1 and beta > 0 and alpha > 0 then
  local here = ns.from_alpha_beta(alpha, beta, n)
  for _, bytes in ipairs({ 4 << 20, 16 << 20 }) do
    local model, measured = ns.ring(here, bytes).time, results.all_reduce[bytes]
    lab.print0(string.format("   this machine, %d ranks, %s: model %.0f us, measured %.0f us (%+.0f%%; beyond the fit's 1 MiB)",
      n, lab.format_bytes(bytes), model * 1e6, measured * 1e6, 100 * (model - measured) / measured))
  end
else
  lab.print0("   (this machine: the fit needs 2 or more ranks and a positive alpha and beta)")
end
lab.print0("   DGX H100 nodes (8 GPUs, NVLink 476 GB/s busbw, 8 x NDR NICs at 47 GB/s achieved):")
lab.print0(string.format("   %7s %6s %12s %12s %12s %12s %12s", "nodes", "GPUs", "ring 64 KiB", "tree 64 KiB", "ring 1 GiB",
  "tree 1 GiB", "busbw ring"))
for _, nodes in ipairs({ 1, 2, 4, 16, 128, 1024 }) do
  local c = ns.cluster({ nodes = nodes })
  local rs, ts, rl, tl = ns.ring(c, 64 * 1024), ns.tree(c, 64 * 1024), ns.ring(c, 2 ^ 30), ns.tree(c, 2 ^ 30)
  lab.print0(string.format("   %7d %6d %9.0f us %9.0f us %9.2f ms %9.2f ms %7.0f GB/s", nodes, 8 * nodes, rs.time * 1e6,
    ts.time * 1e6, rl.time * 1e3, tl.time * 1e3, rl.busbw))
end
for _, p in ipairs(ns.published) do
  lab.print0(string.format("   published: %-46s %3d-%3d GB/s  (%s)", p.what, p.GBps[1], p.GBps[2], p.source))
end
local one, four = ns.ring({ nodes = 1 }, 8 * 2 ^ 30).busbw, ns.ring({ nodes = 4 }, 8 * 2 ^ 30).busbw
check("the model's one-node busbw is the published 475-480 GB/s", one >= 470 and one <= 481)
check("the model's multi-node busbw is 8 rails x the published 46-48 GB/s", four >= 8 * 46 * 0.99 and four <= 8 * 48)
lab.print0("   (on 2 nodes NCCL picks its tree, whose busbw can exceed the NICs' (nccl-tests #196): compare")
lab.print0("   rings with NCCL_ALGO=Ring)")

-- 10,000 GPUs: 1250 nodes, 32 per leaf, so 40 leaves and, per rail, 40 ring hops through the spine
local big = { nodes = 1250, nodes_per_leaf = 32, ecmp_collision = 0.01 }
local clean = ns.ring({ nodes = 1250, nodes_per_leaf = 32 }, 2 ^ 30)
local expected, p_any = ns.expected_ring(big, 2 ^ 30)
lab.print0("   10,000 GPUs (1250 nodes, 32 per leaf, 40 leaves), all_reduce of 1 GiB:")
lab.print0(string.format("     no collision: %.2f ms (busbw %.0f GB/s); latency alone %.2f ms of it (a ring of 10,000 is 19,998 steps)",
  clean.time * 1e3, clean.busbw, ns.ring({ nodes = 1250, nodes_per_leaf = 32 }, 0).time * 1e3))
lab.print0(string.format("     ECMP, each cross-leaf flow colliding with p = 1%%: P(some ring hop collides) = %.0f%%, expected %.2f ms",
  100 * p_any, expected * 1e3))
local over = ns.ring({ nodes = 1250, nodes_per_leaf = 32, oversubscription = 2 }, 2 ^ 30)
lab.print0(string.format("     2:1 oversubscribed spine: %.2f ms (busbw %.0f GB/s)", over.time * 1e3, over.busbw))
lab.print0(string.format("     tree instead, 1 GiB: %.2f ms; 64 KiB: ring %.0f us, tree %.0f us: at this scale the ring's",
  ns.tree(big, 2 ^ 30).time * 1e3, ns.ring(big, 65536).time * 1e6, ns.tree(big, 65536).time * 1e6))
lab.print0("     19,998 latency steps dominate even 1 GiB; NCCL uses trees (and rings within groups) there")
check("a collision somewhere is likely at 10,000 GPUs even at p = 1% (> 90%)", p_any > 0.9)
-- one congested link, on 128 GPUs where 1 GiB is bandwidth-bound: every step of its ring waits
-- for it, and the collective waits for that ring
local c16 = ns.ring({ nodes = 16 }, 2 ^ 30)
local paused = ns.ring({ nodes = 16, pause = { node = 9, rail = 3, fraction = 0.3 } }, 2 ^ 30)
lab.print0(string.format("   128 GPUs, 1 GiB: %.2f ms; with one of its 128 NIC links PFC-paused 30%% of the time: %.2f ms (%.2fx)",
  c16.time * 1e3, paused.time * 1e3, paused.time / c16.time))
lab.print0("     bottleneck: " .. paused.bottleneck)
check("one paused link of 128 slows the whole all-reduce (> 1.25x)", paused.time > 1.25 * c16.time)
finish("lab 11")
