-- Lab 15: long context with context parallelism (CP), ring against all-gather.
--
-- What it shows, measured here:
--   1. Equivalence: ring attention and all-gather attention over the CP ranks give the
--      single-rank attention's output and q/k/v gradients, and a CP GPT the single-rank
--      GPT's loss and every parameter gradient.
--   2. Memory: peak bytes per rank of one forward+backward of a GPT against sequence length,
--      at CP 1, 2 and 4 (groups of that size inside the world), ring vs all-gather. Ring
--      holds two K/V blocks and a [T/N x T/N] score block per step; all-gather holds every
--      rank's K/V and a [T/N x T] score matrix. A bar chart shows the CP sizes at T=256.
--   3. Causal balance: the score entries each rank computes (unmasked query-key pairs) with a
--      contiguous split and with the zigzag split (rank i holds chunks i and 2N-1-i).
--   4. What overlaps: in ring attention each step posts isend/irecv of the next K/V block,
--      computes the current block, then waits. Time in block compute against time still
--      waiting afterwards (communication the compute did not hide), and the bytes sent
--      against the count N-1 K/V blocks forward, N-1 K/V plus N dK/dV blocks backward. The
--      all-gather variant's bytes against the planner's CP term (lab.plan.cp_bytes).
-- Runs at 1-4 ranks; CP sizes that do not divide the world are skipped (at 1 rank: CP 1
-- only, no communication).
--   scripts/llmlab -n 4 scripts/labs/15_long_context.lua
local dist = lab.dist
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(66)
local wg = dist.world_group()
lab.print0(string.format("== Lab 15: long context, context parallelism over %d rank(s) ==", world))
if 256 % (2 * world) ~= 0 then -- section 2's sequence of 256 in 2 x CP zigzag chunks
  lab.print0(string.format("lab 15 does not run on %d ranks: its 256-token sequence does not split into 2 x %d zigzag chunks (1, 2 or 4 ranks do)",
    world, world))
  return
end

local function worst_over_ranks(x)
  local t = lab.tensor({ x }, { dtype = "f64" })
  dist.all_reduce(t, { op = "max" })
  return t[1]
end

-- 1. equivalence
lab.print0("\n1. Equivalence with one rank (B=2, 4 heads, D=8, T=16 x CP, causal, zigzag):")
lab.manual_seed(3)
local T1 = 16 * world
local q, k, v = lab.randn(2, 4, T1, 8):requires_grad_(), lab.randn(2, 4, T1, 8):requires_grad_(), lab.randn(2, 4, T1, 8):requires_grad_()
local w = lab.randn(2, 4, T1, 8)
local full = lab.sdpa(q, k, v, { causal = true })
;(full * w):sum():backward()
local function mine(t) return lab.cp.shard(t:detach(), 3, { group = wg }):contiguous() end
for _, variant in ipairs({ "ring", "allgather" }) do
  local ql, kl, vl = mine(q):requires_grad_(), mine(k):requires_grad_(), mine(v):requires_grad_()
  local fn = variant == "ring" and lab.cp.ring_attention or lab.cp.allgather_attention
  local out = fn(ql, kl, vl, { group = wg })
  ;(out * mine(w)):sum():backward()
  local d = math.max(lab.max_abs_diff(out, mine(full)), lab.max_abs_diff(ql.grad, mine(q.grad)),
    lab.max_abs_diff(kl.grad, mine(k.grad)), lab.max_abs_diff(vl.grad, mine(v.grad)))
  d = worst_over_ranks(d)
  lab.print0(string.format("   %-10s attention: largest difference in output, dq, dk, dv %.2e", variant, d))
  check(variant .. " attention equals single-rank attention (1e-5)", d < 1e-5)
end
local cfg = { vocab = 32, d_model = 32, n_layer = 2, n_head = 4, seq_len = 16 * world, d_ff = 64 }
for _, variant in ipairs({ "ring", "allgather" }) do
  lab.manual_seed(9)
  local twin = lab.nn.GPT(cfg)
  lab.manual_seed(9)
  local model = lab.cp.GPT(cfg, { group = wg, attention = variant })
  local ids = lab.randint(0, 32, { 2, 16 * world })
  select(2, twin(ids, ids)):backward()
  select(2, model(ids, ids)):backward()
  lab.cp.sync_gradients(model, wg)
  local tw, d, count = {}, 0, 0
  for _, np in ipairs(twin:named_parameters()) do tw[np[1]] = np[2] end
  for _, np in ipairs(model:named_parameters()) do
    d = math.max(d, lab.max_abs_diff(np[2].grad, tw[np[1]].grad))
    count = count + 1
  end
  d = worst_over_ranks(d)
  lab.print0(string.format("   CP GPT (%s): %d parameters, largest gradient difference %.2e", variant, count, d))
  check("CP GPT (" .. variant .. ") equals its twin in every gradient (1e-5)", d < 1e-5 and count == #twin:named_parameters())
end

-- 2. memory per rank against sequence length at CP 1/2/4
local sizes = {}
for _, c in ipairs({ 1, 2, 4 }) do if world % c == 0 then sizes[#sizes + 1] = c end end
local lengths = { 64, 128, 256 }
local mcfg = { vocab = 32, d_model = 32, n_layer = 1, n_head = 4, seq_len = 256, d_ff = 64 }
lab.print0("\n2. Peak bytes per rank, one forward+backward (1 layer, d_model 32, 4 heads, B=1), rank 0's group:")
local head = string.format("   %6s", "T")
for _, c in ipairs(sizes) do head = head .. string.format(" %13s %13s", "ring cp" .. c, "gather cp" .. c) end
lab.print0(head)
local groups = {}
for _, c in ipairs(sizes) do groups[c] = dist.split(rank // c, rank % c) end
local peak = {}
for _, T in ipairs(lengths) do
  local line = string.format("   %6d", T)
  peak[T] = {}
  for _, c in ipairs(sizes) do
    for _, variant in ipairs({ "ring", "allgather" }) do
      lab.manual_seed(9)
      local model = lab.cp.GPT(mcfg, { group = groups[c], attention = variant })
      lab.manual_seed(4)
      local ids = lab.randint(0, 32, { 1, T })
      collectgarbage()
      collectgarbage()
      local before = lab.mem.stats().current
      lab.mem.reset_peak()
      local _, l = model(ids, ids)
      l:backward()
      local bytes = lab.mem.stats().peak - before
      peak[T][variant .. c] = worst_over_ranks(bytes)
      line = line .. string.format(" %13s", lab.format_bytes(peak[T][variant .. c]))
      model, l = nil, nil
    end
  end
  lab.print0(line)
end
if rank == 0 then
  local labels, ring, gather = {}, {}, {}
  for i, c in ipairs(sizes) do labels[i], ring[i], gather[i] = "CP " .. c, peak[256]["ring" .. c], peak[256]["allgather" .. c] end
  lab.plot.bar({ labels = labels, series = { { name = "ring", values = ring }, { name = "all-gather", values = gather } } },
    { title = "peak bytes per rank vs CP size, T=256 (slowest rank)", fmt = "bytes" })
end
local cmax = sizes[#sizes]
if cmax > 1 then
  check(string.format("at T=256 ring at CP %d needs less per rank than CP 1", cmax), peak[256]["ring" .. cmax] < peak[256].ring1)
  check(string.format("at T=256 ring at CP %d needs less than all-gather at CP %d", cmax, cmax),
    peak[256]["ring" .. cmax] < peak[256]["allgather" .. cmax])
end

-- 3. causal balance: score entries per rank
lab.print0("\n3. Unmasked query-key pairs per rank (causal, T=256), contiguous split vs zigzag:")
for _, c in ipairs(sizes) do
  local row = {}
  for _, zig in ipairs({ false, true }) do
    local per = {}
    for r = 0, c - 1 do
      local n = 0
      for _, p in ipairs(lab.cp.positions(256, c, r, zig)) do n = n + p + 1 end -- query p sees keys 0..p
      per[#per + 1] = n
    end
    local mx, mn = math.max(table.unpack(per)), math.min(table.unpack(per))
    row[#row + 1] = string.format("%s [%s] max/min %.2f", zig and "zigzag" or "contiguous", table.concat(per, " "), mx / mn)
    if zig then check(string.format("zigzag gives every rank the same causal work at CP %d", c), mx == mn) end
  end
  lab.print0(string.format("   CP %d: %s", c, table.concat(row, "   ")))
end

-- 4. what overlaps, and the bytes
lab.print0(string.format("\n4. Ring attention at CP %d, T=256, one forward+backward of the 1-layer GPT:", world))
lab.manual_seed(9)
local model = lab.cp.GPT(mcfg, { group = wg, attention = "ring" })
local ids = lab.randint(0, 32, { 1, 256 })
lab.cp.timing.compute, lab.cp.timing.wait = 0, 0
dist.reset_stats()
select(2, model(ids, ids)):backward()
local st = dist.stats().world or {}
local sent = st.send and st.send.bytes or 0
local block = 1 * 4 * (256 // world) * 8 * 4 -- one K (or V) block: [B, H, T/N, D] f32
local want = mcfg.n_layer * ((world - 1) * 2 + (world - 1) * 2 + (world > 1 and 2 * world or 0)) * block
local comp, waited = worst_over_ranks(lab.cp.timing.compute), worst_over_ranks(lab.cp.timing.wait)
lab.print0(string.format("   block compute %.1f ms, then still waiting for the next block %.1f ms (slowest rank): communication the compute did not hide",
  comp * 1e3, waited * 1e3))
lab.print0(string.format("   bytes sent %s = layers x (2(N-1) + 2(N-1) + 2N) blocks of %s", lab.format_bytes(sent), lab.format_bytes(block)))
check("ring bytes sent equal the block count", sent == want)
lab.manual_seed(9)
local gm = lab.cp.GPT(mcfg, { group = wg, attention = "allgather" })
dist.reset_stats()
select(2, gm(ids, ids)):backward()
local gs = dist.stats().world or {}
local got = (gs.all_gather and gs.all_gather.wire_bytes or 0) + (gs.reduce_scatter and gs.reduce_scatter.wire_bytes or 0)
local plan = lab.plan.cp_bytes({ hidden = 32, heads = 4, kv_heads = 4 }, { seq = 256, precision = "f32" },
  { cp = world, tp = 1, mb = 1, microbatches = 1 }, mcfg.n_layer)
lab.print0(string.format("   all-gather variant: K/V all-gather + reduce-scatter wire bytes %s, planner's CP term %s",
  lab.format_bytes(got), lab.format_bytes(plan)))
check("all-gather CP bytes equal lab.plan.cp_bytes", math.abs(got - plan) < 0.5)
finish("lab 15")
