-- Lab 10: loss spikes, all four layers.
--
-- What it shows: a data-parallel GPT in bf16 mixed precision, watched by lab.monitor, with
-- one fault planted per layer of a loss spike (lab.fault), each found and attributed by the
-- tools alone, then repaired the way large runs repair it and checked against a clean run:
--   1. data: a bad batch on the last rank (one token it has never seen). Evidence: that
--      rank's loss alone, reproduced by the rerun. Remedy: rewind to the checkpoint and skip
--      the batch; equal, bit for bit, to a run that never saw it.
--   2. numeric: attention logits overflow (q and k of the last block scaled by 2^66 from a
--      step on: logits past bf16's and fp32's range). Evidence: NaN/Inf first in the last
--      block's attention output; anomaly mode names the op. Remedy: QK-norm (q and k
--      normalised per head before their product); the loss stays in the clean run's band.
--   3. communication: one rank's all-reduce result wrong (the sum where the average was
--      asked). Evidence: the DDP buckets' checksums differ after the all-reduce. Remedy:
--      re-sync every rank from a good replica (3+ ranks: the majority names it); equal to the
--      clean run from then on, bit for bit. At 2 ranks no majority: rewind and replay.
--   4. hardware: one bit flipped in a weight of one rank (silent data corruption) on a rank
--      that is also a straggler. Evidence: check_replicas names the weight and the rank, the
--      step time names the slow rank. Remedy: exclude the rank and resume from the last
--      checkpoint on the others (resharding); equal to a clean run at that world size from
--      the same checkpoint, bit for bit.
-- At 1 rank parts 3 and 4 need another rank and are skipped with a line.
--   scripts/llmlab -n 4 scripts/labs/10_loss_spikes.lua
local dist = lab.dist
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(74)
lab.print0(string.format("== Lab 10: loss spikes in four layers, %d rank(s), bf16 mixed precision ==", world))

local cfg = { vocab = 64, d_model = 32, n_layer = 2, n_head = 4, seq_len = 16 }
local LR, EVERY = 3e-3, 8
local BAD, OVERFLOW, COMM, FLIP = 12, 18, 19, 27 -- the steps the faults fire at
local VICTIM = world >= 3 and 1 or world - 1      -- the rank of parts 3 and 4 (not the last)
local run_id = lab.tensor({ os.time() % 100000 * 1000 + math.random(0, 999) }, { dtype = "i64" })
dist.broadcast(run_id, 0)
local dir = string.format("/tmp/llmlab-lab10-%d", run_id[1])

-- QK-norm, the remedy of part 2: q and k scaled into range (by their largest |value|, which
-- cannot overflow) and RMS-normalised per head, so their product is at most head_dim
local function qk_norm(t)
  local m = t:float():abs():max(-1, true)
  return lab.rms_norm(t:float() / (m + 1e-30), nil, 1e-6):to(t.dtype)
end
local function attention_with_qk_norm(self, x)
  local B, T, C = x.shape[1], x.shape[2], x.shape[3]
  local H = self.n_head
  local q, k, v = table.unpack(self.qkv(x):split(C, 3))
  local function heads(t) return t:view(B, T, H, C // H):transpose(2, 3) end
  local y = lab.sdpa(qk_norm(heads(q)), qk_norm(heads(k)), heads(v), { causal = true })
  return self.drop(self.proj(y:transpose(2, 3):contiguous():view(B, T, C)))
end

-- a fresh model on `group` (nil: the world), bf16 with fp32 masters, DDP, and its monitor
local function fresh(group, opts)
  opts = opts or {}
  lab.manual_seed(7)
  local gpt = lab.nn.GPT(cfg)
  if opts.qk_norm then
    for _, b in gpt.blocks:iter() do b.attn.forward = attention_with_qk_norm end
  end
  local mp = lab.amp.MixedPrecision(gpt, { dtype = "bf16",
    optimizer = function(ps) return lab.optim.AdamW(ps, { lr = LR }) end })
  local model = lab.ddp.wrap(gpt, { group = group })
  local m = { gpt = gpt, mp = mp, model = model, group = group, pos = dist.rank(group), n = dist.world(group) }
  -- a run resumed from a checkpoint keeps the monitor's baselines of that moment, as a
  -- restarted job would (opts.baseline)
  m.mon = lab.monitor.new(model, { amp = mp, group = group, straggler_min = 0.05, baseline = opts.baseline })
  return m
end

-- the data of step k for the rank at position pos of the group: multiples of 4; the bad
-- batch is token 63, repeated
local function batch(k, pos, bad)
  lab.manual_seed(1000 * k + pos)
  if bad == k and pos == world - 1 then return lab.full({ 4, cfg.seq_len }, 63, { dtype = "i64" }) end
  return lab.randint(0, cfg.vocab // 4, { 4, cfg.seq_len }) * 4
end

-- every weight, master and optimizer state as one string of checksums: equal strings are
-- bit-equal states
local function fingerprint(m)
  local out = {}
  for _, np in ipairs(m.gpt:named_parameters()) do out[#out + 1] = np[2]:checksum() end
  for i, p in ipairs(m.mp.master_params) do
    out[#out + 1] = p:checksum()
    local st = m.mp.optimizer.state[i]
    if st then out[#out + 1] = st.m:checksum() .. ":" .. st.v:checksum() end
  end
  return table.concat(out, ",")
end

-- trains steps from..to. o: bad (the bad batch's step), skip (a step whose batch is skipped:
-- no update), dir (checkpoints every EVERY steps), on_verdict(k, rec) -> "skip" to skip the
-- update, "stop" to stop after this step; after(k). Returns the mean loss and the fingerprint of every step.
local function train(m, from, to, o)
  o = o or {}
  local out = { loss = {}, fp = {}, records = {}, baseline = {} }
  for k = from, to do
    if k ~= o.skip then
      m.mon:begin(k)
      lab.fault.step(k)
      m.mp:zero_grad()
      local ids = batch(k, m.pos, o.bad)
      local _, loss = m.model(ids, ids)
      m.mp:backward(loss)
      local rec = m.mon:check({ loss = loss, recompute = function(r)
        local b = batch(k, r, o.bad)
        local _, l = m.gpt(b, b)
        return l
      end })
      out.records[k] = rec
      local mean = 0
      for _, l in ipairs(rec.loss) do mean = mean + l / #rec.loss end
      out.loss[k] = mean
      local action = rec.verdict and o.on_verdict and o.on_verdict(k, rec)
      if action ~= "skip" then m.mp:step() end
      m.mon:finish()
      if o.after then o.after(k, rec) end
      if action == "stop" then break end -- an operator stops the run here
    end
    out.fp[k] = fingerprint(m)
    if o.dir and k % EVERY == 0 then
      lab.ckpt.save(string.format("%s/step%d", o.dir, k), { model = m.gpt, amp = m.mp, step = k, group = m.group })
      out.baseline[k] = m.mon:baseline()
    end
  end
  return out
end

local function verdicts(r)
  local list = {}
  for k, rec in pairs(r.records) do if rec.verdict then list[#list + 1] = k end end
  table.sort(list)
  return list
end

local function show(k, rec)
  local v = rec.verdict
  lab.print0(string.format("   step %2d  -> %s%s%s: %s", k, v.layer:upper(),
    #v.ranks > 0 and ", rank(s) " .. table.concat(v.ranks, " and ") or "", v.module and ", module " .. v.module or "", v.why))
end

-- 0. The clean run: no fault, batch BAD skipped (the run part 1's remedy must equal)
lab.print0(string.format("\n0. The clean run: %d steps, checkpoints every %d, the monitor on every step", FLIP + 2, EVERY))
local clean_model = fresh()
local clean = train(clean_model, 1, FLIP + 2, { skip = BAD, dir = dir .. "/clean" })
do -- what the monitor records each step (mon.records[k], and a JSON line with opts.jsonl)
  local rec = clean.records[FLIP + 2]
  local ls, top, top_n = {}, nil, -1
  for r, l in ipairs(rec.loss) do ls[r] = string.format("%.3f", l) end
  for name, n in pairs(rec.grad_norm_by_module) do if n > top_n then top, top_n = name, n end end
  local a = rec.activations["blocks.2.attn"]
  lab.print0(string.format("   the monitor's record of step %d: loss per rank %s; grad norm %.3f, largest in %s (%.3f);",
    FLIP + 2, table.concat(ls, " "), rec.grad_norm, top, top_n))
  lab.print0(string.format("     blocks.2.attn output max %.2f, RMS %.3f; update/weight %.1e; slowest rank %d (%.1f ms);"
    .. " %d replica and %d bucket differences", a.max, a.rms, rec.update_ratio, rec.slowest.rank, rec.slowest.time * 1e3,
    #(rec.replica_mismatch or {}), #(rec.grad_mismatch or {})))
end
check("no verdict in the clean run (no false alarm)", #verdicts(clean) == 0)
local times = {}
for k = 1, FLIP + 2 do
  for _, t in ipairs(clean.records[k] and clean.records[k].time or {}) do times[#times + 1] = t end
end
table.sort(times)
local step_time, p90 = times[(#times + 1) // 2], times[math.ceil(0.9 * #times)]
lab.print0(string.format("   loss %.3f at step 1, %.3f at step %d; a step computes in %.1f ms (90th percentile %.1f ms)",
  clean.loss[1], clean.loss[FLIP + 2], FLIP + 2, step_time * 1e3, p90 * 1e3))
clean_model.mon:remove()

-- 1. data
lab.print0(string.format("\n1. DATA: a bad batch on rank %d at step %d", world - 1, BAD))
local m1 = fresh()
local r1 = train(m1, 1, BAD, { bad = BAD, dir = dir .. "/run1" })
m1.mon:remove()
local v1 = r1.records[BAD].verdict
if v1 then show(BAD, r1.records[BAD]) end
local rr = r1.records[BAD].rerun
if rr then
  local parts = {}
  for b, col in ipairs(rr.losses) do parts[#parts + 1] = string.format("batch of r%d: %.3f", b - 1, col[1]) end
  lab.print0("   rerun on every rank: " .. table.concat(parts, ", ") .. " (each the same on every rank)")
end
check("one verdict in the run, at the bad batch's step", #verdicts(r1) == 1 and verdicts(r1)[1] == BAD)
check("layer: data; rank " .. (world - 1), v1 and v1.layer == "data" and #v1.ranks == 1 and v1.ranks[1] == world - 1)
lab.print0(string.format("   remedy: rewind to step %d, skip batch %d, replay to %d", EVERY, BAD, 2 * EVERY))
local m1b = fresh()
lab.ckpt.load(dir .. "/run1/step" .. EVERY, { model = m1b.gpt, amp = m1b.mp })
local r1b = train(m1b, EVERY + 1, 2 * EVERY, { skip = BAD })
m1b.mon:remove()
check("the replay equals the clean run at step " .. 2 * EVERY .. ", bit for bit (every weight and state)",
  r1b.fp[2 * EVERY] == clean.fp[2 * EVERY])

-- 2. numeric
lab.print0(string.format("\n2. NUMERIC: q and k of blocks.2.attn scaled by 2^66 from step %d (logits overflow)", OVERFLOW))
local m2 = fresh(nil, { baseline = clean.baseline[2 * EVERY] })
lab.ckpt.load(string.format("%s/clean/step%d", dir, 2 * EVERY), { model = m2.gpt, amp = m2.mp })
local function plant_overflow(m)
  lab.fault.overflow({ model = m.gpt, name = "blocks.2.attn.qkv", scale = 2.0 ^ 66, cols = { 1, 2 * cfg.d_model },
    from = OVERFLOW, to = FLIP + 2 })
end
plant_overflow(m2)
local anomaly
local r2 = train(m2, 2 * EVERY + 1, OVERFLOW, { on_verdict = function(k, rec)
  -- the step again under anomaly mode: the first op to make a NaN or Inf, and where
  local ids = batch(k, m2.pos)
  local ok, err = pcall(lab.autograd.detect_anomaly, function()
    m2.model:no_sync(function()
      local _, l = m2.gpt(ids, ids)
      l:backward()
    end)
  end)
  anomaly = not ok and tostring(err) or nil
  return "skip"
end })
lab.fault.clear()
m2.mon:remove()
local v2 = r2.records[OVERFLOW].verdict
if v2 then show(OVERFLOW, r2.records[OVERFLOW]) end
if anomaly then
  lab.print0("   anomaly mode: " .. anomaly:match("detect_anomaly: ([^\n]*)") .. "; " .. (anomaly:match("(module [^\n]*)") or ""))
end
check("layer: numeric; module blocks.2.attn", v2 and v2.layer == "numeric" and v2.module == "blocks.2.attn")
check("anomaly mode names the attention op in blocks.2.attn",
  anomaly ~= nil and anomaly:find("sdpa", 1, true) ~= nil and anomaly:find("module blocks.2.attn", 1, true) ~= nil)
lab.print0(string.format("   remedy: QK-norm, from the checkpoint of step %d, the overflow still planted", 2 * EVERY))
local m2b = fresh(nil, { qk_norm = true, baseline = clean.baseline[2 * EVERY] })
lab.ckpt.load(string.format("%s/clean/step%d", dir, 2 * EVERY), { model = m2b.gpt, amp = m2b.mp })
plant_overflow(m2b)
local r2b = train(m2b, 2 * EVERY + 1, FLIP + 2)
lab.fault.clear()
m2b.mon:remove()
-- the band: finite, and never more than 10% above the clean run's loss at the same step (a
-- remedy may train better than the clean run, as QK-norm does here; it must not train worse)
local worst = -math.huge
for k = 2 * EVERY + 1, FLIP + 2 do
  local l = r2b.loss[k]
  worst = (l == l and l < math.huge) and math.max(worst, (l - clean.loss[k]) / clean.loss[k]) or math.huge
end
lab.print0(string.format(
  "   loss at step %d: %.3f with QK-norm under the overflow, %.3f clean; at most %+.1f%% against the clean run",
  FLIP + 2, r2b.loss[FLIP + 2], clean.loss[FLIP + 2], 100 * worst))
check("with QK-norm: no verdict, and the loss finite and under the clean run's + 10% at every step",
  #verdicts(r2b) == 0 and worst < 0.10)

-- 3. communication
if world == 1 then
  lab.print0("\n3. COMMUNICATION: skipped at 1 rank (a collective needs another rank)")
else
  lab.print0(string.format("\n3. COMMUNICATION: rank %d's all-reduce returns the sum for the average at step %d", VICTIM, COMM))
  local m3 = fresh(nil, { baseline = clean.baseline[2 * EVERY] })
  lab.ckpt.load(string.format("%s/clean/step%d", dir, 2 * EVERY), { model = m3.gpt, amp = m3.mp })
  lab.fault.corrupt_collective({ rank = VICTIM, step = COMM, mode = "wrong_op" })
  local resynced
  local r3 = train(m3, 2 * EVERY + 1, 3 * EVERY, { on_verdict = function()
    if world < 3 then return "stop" end -- no majority to re-sync from: stop, rewind (below)
  end, after = function(k, rec)
    local v = rec.verdict
    if not (v and v.layer == "communication") or world < 3 then return end
    -- the step ran (as a run without the check would have); re-sync from the lowest rank
    -- the majority trusts: weights, masters and optimizer state
    local bad = {}
    for _, r in ipairs(v.ranks) do bad[r] = true end
    local src = 0
    while bad[src] do src = src + 1 end
    lab.no_grad(function()
      for i, p in ipairs(m3.mp.master_params) do
        dist.broadcast(p, src)
        dist.broadcast(m3.mp.optimizer.state[i].m, src)
        dist.broadcast(m3.mp.optimizer.state[i].v, src)
      end
    end)
    m3.mp:sync_model()
    resynced = { step = k, src = src }
  end })
  lab.fault.clear()
  m3.mon:remove()
  local v3 = r3.records[COMM].verdict
  if v3 then show(COMM, r3.records[COMM]) end
  check("one verdict, at step " .. COMM, #verdicts(r3) == 1 and verdicts(r3)[1] == COMM)
  check("layer: communication; " .. (world >= 3 and "rank " .. VICTIM or "both ranks (no majority at 2)"),
    v3 and v3.layer == "communication" and (world >= 3 and #v3.ranks == 1 and v3.ranks[1] == VICTIM or #v3.ranks == 2))
  if world >= 3 then
    lab.print0(string.format("   remedy: re-sync every rank from rank %d after step %d", resynced and resynced.src or -1, COMM))
    local same = true
    for k = COMM, 3 * EVERY do same = same and r3.fp[k] == clean.fp[k] end
    check(string.format("from the re-sync on (steps %d-%d) equal to the clean run, bit for bit", COMM, 3 * EVERY), same)
  else
    lab.print0(string.format("   remedy: no majority at 2 ranks: rewind to step %d and replay", 2 * EVERY))
    local m3b = fresh(nil, { baseline = clean.baseline[2 * EVERY] })
    lab.ckpt.load(string.format("%s/clean/step%d", dir, 2 * EVERY), { model = m3b.gpt, amp = m3b.mp })
    local r3b = train(m3b, 2 * EVERY + 1, 3 * EVERY)
    m3b.mon:remove()
    check("the replay equals the clean run at step " .. 3 * EVERY .. ", bit for bit", r3b.fp[3 * EVERY] == clean.fp[3 * EVERY])
  end
end

-- 4. hardware
if world == 1 then
  lab.print0("\n4. HARDWARE: skipped at 1 rank (a replica to compare with and ranks to resume on are needed)")
else
  -- the straggler's delay: well past the clean run's own spread
  local delay = math.max(12 * step_time, 6 * p90, 0.2)
  lab.print0(string.format(
    "\n4. HARDWARE: rank %d slowed by %.0f ms from step %d, and one bit of a master weight flipped there at step %d",
    VICTIM, delay * 1e3, FLIP - 1, FLIP))
  local m4 = fresh(nil, { baseline = clean.baseline[3 * EVERY] })
  lab.ckpt.load(string.format("%s/clean/step%d", dir, 3 * EVERY), { model = m4.gpt, amp = m4.mp })
  local master -- the master of blocks.1.mlp.fc.weight
  for i, np in ipairs(m4.gpt:named_parameters()) do
    if np[1] == "blocks.1.mlp.fc.weight" then master = m4.mp.master_params[i] end
  end
  -- (not from step 3*EVERY+1: the first step after a resume is slow on every rank)
  lab.fault.straggler({ rank = VICTIM, delay = delay, from = FLIP - 1, to = FLIP })
  lab.fault.flip_bit({ what = "param", tensor = master, name = "master of blocks.1.mlp.fc.weight", index = 77, bit = 30,
    rank = VICTIM, step = FLIP })
  local r4 = train(m4, 3 * EVERY + 1, FLIP, { on_verdict = function() return "skip" end })
  lab.fault.clear()
  m4.mon:remove()
  local rec = r4.records[FLIP]
  if rec.verdict then show(FLIP, rec) end
  local kinds = {}
  for _, a in ipairs(rec.alarms) do
    if a.kind == "replica_mismatch" then
      kinds[#kinds + 1] = string.format("%s differs on rank(s) %s", a.name, table.concat(a.ranks, ","))
    elseif a.kind == "straggler" then
      kinds[#kinds + 1] = string.format("rank %d computes in %.0f ms (the others %.0f ms now, the run's median %.0f ms)",
        a.rank, a.value * 1e3, a.baseline * 1e3, a.run_median * 1e3)
    end
  end
  lab.print0("   evidence: " .. table.concat(kinds, "; "))
  local flagged, slow = false, false
  for _, a in ipairs(rec.alarms) do
    if a.kind == "replica_mismatch" and a.name == "master.blocks.1.mlp.fc.weight" then
      flagged = world >= 3 and #a.ranks == 1 and a.ranks[1] == VICTIM or #a.ranks == 2
    end
    -- 5x against the run's median step: the others' time this step moves with the machine's
    -- load (under ctest -j2 part of their wait for the straggler shows as their compute)
    if a.kind == "straggler" and a.rank == VICTIM and a.value >= 5 * a.run_median then slow = true end
  end
  check("layer: hardware", rec.verdict and rec.verdict.layer == "hardware")
  check("check_replicas names the flipped master and " .. (world >= 3 and "rank " .. VICTIM or "both ranks"), flagged)
  check("the straggler is named, at least 5x slower than the run's median step", slow)
  -- the remedy: exclude the rank (at 2 ranks the straggler check is the only one that names
  -- it) and resume from the checkpoint of step 3*EVERY on the others
  local survivors, first = {}, {}
  for r = 0, world - 1 do
    if r ~= VICTIM then survivors[#survivors + 1] = r end
    if r < world - 1 then first[#first + 1] = r end
  end
  lab.print0(string.format("   remedy: exclude rank %d; resume ranks %s from step %d (resharded to %d rank(s))", VICTIM,
    table.concat(survivors, ","), 3 * EVERY, world - 1))
  local gs, gc = dist.new_group(survivors), dist.new_group(first)
  local fp_resumed, fp_clean
  if rank ~= VICTIM then
    local m = fresh(gs)
    lab.ckpt.load(string.format("%s/clean/step%d", dir, 3 * EVERY), { model = m.gpt, amp = m.mp, group = gs })
    fp_resumed = train(m, 3 * EVERY + 1, FLIP + 2).fp[FLIP + 2]
    m.mon:remove()
  end
  if rank < world - 1 then -- the clean run at that world size, from the same checkpoint
    local m = fresh(gc)
    lab.ckpt.load(string.format("%s/clean/step%d", dir, 3 * EVERY), { model = m.gpt, amp = m.mp, group = gc })
    fp_clean = train(m, 3 * EVERY + 1, FLIP + 2).fp[FLIP + 2]
    m.mon:remove()
  end
  -- each rank compares its own copy where it holds both (every rank but the victim and the last)
  local both = fp_resumed and fp_clean
  check(string.format("resumed on %d rank(s) = a clean run at %d from the same checkpoint, bit for bit", world - 1, world - 1),
    not both or fp_resumed == fp_clean)
end

dist.barrier()
if rank == 0 then os.execute("rm -rf '" .. dir .. "'") end
finish("lab 10")
