-- lab.monitor, lab.fault and anomaly mode (issue 28): every fault kind planted in a DDP GPT
-- is found and its layer named by the monitor alone (at 2 and 4 ranks; its rank too at 3 and
-- 4), a single flipped bit in any parameter is found by check_replicas, a clean run raises
-- no alarm, and detect_anomaly names the op for a NaN planted in each fused kernel.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local rank, world = lab.dist.rank(), lab.dist.world()
local cfg = { vocab = 32, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8 }

local function batch(k, r)
  lab.manual_seed(1000 * k + r)
  return lab.randint(0, cfg.vocab // 4, { 2, cfg.seq_len }) * 4
end

local function setup()
  lab.manual_seed(7)
  local gpt = lab.nn.GPT(cfg)
  local model = lab.ddp.wrap(gpt)
  local opt = lab.optim.AdamW(model:parameters(), { lr = 3e-3 })
  return gpt, model, opt, lab.monitor.new(model, { optimizer = opt })
end

-- trains `steps` steps with the faults `arm` plants; returns the records with a verdict
local function run(steps, arm)
  local gpt, model, opt, mon = setup()
  if arm then arm(gpt, model, opt) end
  local found = {}
  for k = 1, steps do
    mon:begin(k)
    lab.fault.step(k)
    opt:zero_grad()
    local ids = batch(k, rank)
    local _, loss = model(ids, ids)
    loss:backward()
    local rec = mon:check({ loss = loss, recompute = function(r)
      local b = batch(k, r)
      local _, l = gpt(b, b)
      return l
    end })
    if rec.verdict then found[#found + 1] = rec end
    if rec.verdict then -- skip the step, and re-sync from the first rank the tools trust
      local bad = {}
      for _, r in ipairs(rec.verdict.ranks) do bad[r] = true end
      local src = 0
      while bad[src] do src = src + 1 end
      if src >= world then src = 0 end -- no majority: any rank, the check runs again
      do
        lab.no_grad(function()
          for _, p in ipairs(gpt:parameters()) do lab.dist.broadcast(p, src) end
          for _, s in pairs(opt.state) do
            lab.dist.broadcast(s.m, src)
            lab.dist.broadcast(s.v, src)
          end
        end)
      end
    else
      opt:step()
    end
    mon:finish()
  end
  mon:remove()
  lab.fault.clear()
  return found
end

local function same(a, b)
  table.sort(a)
  table.sort(b)
  return table.concat(a, ",") == table.concat(b, ",")
end

-- the verdict at step k names the layer, and (at 3+ ranks) the rank
local function expect(found, k, layer, bad_rank, what)
  local rec
  for _, r in ipairs(found) do if r.step == k then rec = r end end
  T.ok(rec ~= nil, what .. ": detected at step " .. k)
  if not rec then return end
  T.eq(rec.verdict.layer, layer, what .. ": layer")
  if bad_rank and world >= 3 then
    T.ok(same(rec.verdict.ranks, { bad_rank }), what .. ": rank " .. bad_rank .. ", got " .. table.concat(rec.verdict.ranks, ","))
  elseif bad_rank and world == 2 and layer ~= "hardware" then
    T.ok(#rec.verdict.ranks >= 1, what .. ": ranks named")
  end
  T.eq(#found, 1, what .. ": one verdict only (" .. #found .. ")")
end

T.test("no false alarm over 300 clean steps at 2 ranks (40 elsewhere)", function()
  local found = run(world == 2 and 300 or 40)
  T.eq(#found, 0, "clean steps with a verdict")
  for _, r in ipairs(found) do T.ok(false, string.format("step %d: %s", r.step, lab.monitor.to_json(r.alarms))) end
end)

if world >= 2 then
  local victim = world - 1
  T.test("a parameter bit flip: hardware", function()
    expect(run(16, function(gpt)
      lab.fault.flip_bit({ what = "param", model = gpt, name = "blocks.2.mlp.fc.weight", index = 5, bit = 30,
        rank = victim, step = 13 })
    end), 13, "hardware", victim, "param flip")
  end)
  T.test("an optimizer-state bit flip: hardware", function()
    expect(run(16, function(_, _, opt)
      lab.fault.flip_bit({ what = "optimizer", optimizer = opt, param_index = 3, state = "v", index = 2, bit = 29,
        rank = victim, step = 13 })
    end), 13, "hardware", victim, "optimizer flip")
  end)
  T.test("a gradient bit flip before the all-reduce: hardware, by the rerun", function()
    expect(run(16, function(_, model)
      lab.fault.flip_bit({ what = "grad", model = model, name = "blocks.1.attn.qkv.weight", index = 9, bit = 30,
        rank = victim, step = 13 })
    end), 13, "hardware", victim, "grad flip")
  end)
  for _, mode in ipairs({ "element", "bit", "wrong_op" }) do
    T.test("a corrupted all_reduce (" .. mode .. "): communication", function()
      expect(run(16, function()
        lab.fault.corrupt_collective({ rank = victim, step = 13, mode = mode, index = 4, bit = 20 })
      end), 13, "communication", victim, "collective " .. mode)
    end)
  end
  T.test("a straggler: hardware, at its second slow step, and at least 5x slower", function()
    local found = run(16, function()
      lab.fault.straggler({ rank = victim, delay = { 0.5, 0.7 }, from = 13, to = 14 }) -- random in [0.5, 0.7] s
    end)
    expect(found, 14, "hardware", victim, "straggler")
    local rec = found[1]
    if rec then
      T.ok(rec.slowest.rank == victim, "the slowest rank is named")
      local a
      for _, x in ipairs(rec.alarms) do if x.kind == "straggler" then a = x end end
      T.ok(a and a.value >= 5 * a.run_median, string.format("%.3f s vs the run's median %.3f s", rec.slowest.time,
        a and a.run_median or 0))
    end
  end)
end

T.test("an overflow in one module's forward: numeric, module named", function()
  local found = run(16, function(gpt)
    lab.fault.overflow({ model = gpt, name = "blocks.2.attn.qkv", scale = 2.0 ^ 70, cols = { 1, 2 * cfg.d_model }, step = 13 })
  end)
  expect(found, 13, "numeric", nil, "overflow")
  if found[1] then T.eq(found[1].verdict.module:match("^blocks%.2%.attn"), "blocks.2.attn", "module") end
end)

-- a NaN that appears once and not on the rerun is not the numbers (they would reproduce it):
-- the rerun on the same rank differs, which is a transient hardware fault on that rank
T.test("a NaN planted once in one op on one rank: the rerun does not reproduce it: hardware", function()
  local victim = world - 1
  local found = run(16, function()
    lab.fault.nan({ op = "layer_norm", step = 13, rank = victim })
  end)
  expect(found, 13, "hardware", victim, "transient NaN")
  local rec = found[1]
  if rec then
    T.ok(rec.rerun and #rec.rerun.same_rank == 1 and rec.rerun.same_rank[1] == victim, "named by its own rerun")
    local first
    for _, a in ipairs(rec.alarms) do
      if a.kind == "activation_nonfinite" and (not first or a.order < first.order) then first = a end
    end
    T.eq(first and first.module, "blocks.1.ln1", "the activations show where it began")
  end
end)

T.test("a bad batch: data", function()
  local gpt, model, opt, mon = setup()
  local found
  for k = 1, 22 do
    mon:begin(k)
    opt:zero_grad()
    local function b(kk, r)
      if kk == 20 and r == world - 1 then return lab.full({ 2, cfg.seq_len }, cfg.vocab - 1, { dtype = "i64" }) end
      return batch(kk, r)
    end
    local ids = b(k, rank)
    local _, loss = model(ids, ids)
    loss:backward()
    local rec = mon:check({ loss = loss, recompute = function(r) local x = b(k, r); local _, l = gpt(x, x); return l end })
    if rec.verdict then found = found or rec end
    opt:step()
    mon:finish()
  end
  mon:remove()
  T.ok(found and found.step == 20, "detected at step 20")
  if found then
    T.eq(found.verdict.layer, "data", "layer")
    T.ok(found.rerun and #found.rerun.same_rank == 0 and #found.rerun.disagree == 0, "the rerun reproduces it")
    if world > 1 then T.ok(same(found.verdict.ranks, { world - 1 }), "the rank with the bad batch") end
  end
end)

T.test("check_replicas finds one flipped bit in any parameter", function()
  lab.manual_seed(7)
  local gpt = lab.nn.GPT(cfg)
  lab.ddp.wrap(gpt)
  T.eq(#lab.monitor.check_replicas(gpt), 0, "consistent replicas")
  local named = gpt:named_parameters()
  for i, np in ipairs(named) do
    local victim = i % world
    -- the bit: the sign (of zeros too), the top exponent bit, the lowest mantissa bit
    local bit = ({ 31, 30, 0, 22 })[i % 4 + 1]
    local index = (i * 7) % np[2]:numel() + 1
    if rank == victim then lab._flip_bit(np[2], index, bit) end
    local diff = lab.monitor.check_replicas(gpt)
    T.eq(#diff, world > 1 and 1 or 0, np[1] .. " bit " .. bit .. ": one difference")
    if world > 1 and diff[1] then
      T.eq(diff[1].name, np[1], "its name")
      if world >= 3 then T.ok(same(diff[1].ranks, { victim }), "its rank") else T.eq(#diff[1].ranks, 2, "both ranks") end
    end
    if rank == victim then lab._flip_bit(np[2], index, bit) end
  end
end)

T.test("detect_anomaly names the op for a NaN planted in each fused kernel", function()
  lab.manual_seed(3)
  local gpt = lab.nn.GPT(cfg)
  local ids = batch(1, 0)
  -- op, the module of its first forward, the module of its first backward (the last forward)
  local cases = { { "linear_gelu_tanh", "blocks.1.mlp", "blocks.2.mlp" }, { "layer_norm", "blocks.1.ln1", "ln_f" },
    { "sdpa_flash", "blocks.1.attn", "blocks.2.attn" }, { "cross_entropy", "<root GPT>", "<root GPT>" } }
  for _, c in ipairs(cases) do
    for _, backward in ipairs({ false, true }) do
      local what = c[1] .. (backward and " backward" or " forward")
      lab.fault.nan({ op = c[1], backward = backward })
      lab.fault.step(1)
      local ok, err = pcall(lab.autograd.detect_anomaly, function()
        local _, loss = gpt(ids, ids)
        loss:backward()
      end)
      lab.fault.clear()
      T.ok(not ok, what .. ": raised")
      err = tostring(err)
      T.ok(err:find("rank " .. rank .. ": detect_anomaly: " .. c[1] .. " produced", 1, true), what .. ": names the op: " .. err)
      T.ok(err:find(backward and "gradient of its input" or "in its output", 1, true), what .. ": the direction")
      -- backward: the module recorded at forward; forward: the fused op's module
      local m = backward and c[3] or c[2]
      T.ok(err:find("module " .. m .. " (", 1, true), what .. ": names module " .. m .. ": " .. err)
      T.ok(err:find("forward traceback", 1, true) and err:find("gpt.lua", 1, true), what .. ": forward traceback")
      T.ok(not lab.autograd.is_anomaly_enabled(), what .. ": off afterwards")
    end
  end
  -- a forward that overflows by itself (no planted NaN): the first op to produce Inf
  local x = lab.full({ 2, 4 }, 3e38):requires_grad_(true)
  local ok, err = pcall(lab.autograd.detect_anomaly, function() return (x * 10):sum() end)
  T.ok(not ok and tostring(err):find("detect_anomaly: mul produced", 1, true), "mul's overflow named: " .. tostring(err))
  -- the <close> form
  do
    local _ <close> = lab.autograd.detect_anomaly()
    T.ok(lab.autograd.is_anomaly_enabled(), "on inside the block")
  end
  T.ok(not lab.autograd.is_anomaly_enabled(), "off after the block")
end)

T.test("a record per step, and one JSON line per step", function()
  local path = string.format("/tmp/llmlab-test-monitor-%d.jsonl", os.time())
  lab.dist.barrier()
  lab.manual_seed(7)
  local gpt = lab.nn.GPT(cfg)
  local model = lab.ddp.wrap(gpt)
  local opt = lab.optim.AdamW(model:parameters(), { lr = 3e-3 })
  local mon = lab.monitor.new(model, { optimizer = opt, jsonl = path })
  for k = 1, 3 do
    mon:begin(k)
    opt:zero_grad()
    local ids = batch(k, rank)
    local _, loss = model(ids, ids)
    loss:backward()
    mon:check({ loss = loss })
    opt:step()
    mon:finish()
  end
  local _, eval_loss = gpt(batch(9, rank), batch(9, rank)) -- a forward outside a step: not counted, no error
  T.ok(eval_loss:item() > 0, "a forward between steps")
  mon:remove()
  local rec = mon.records[3]
  T.eq(#rec.loss, world, "a loss per rank")
  T.ok(rec.grad_norm > 0 and rec.grad_norm_by_module["blocks.1.attn"] > 0, "grad norm, and per module")
  T.ok(rec.activations["blocks.1.attn"].max > 0 and rec.activations["blocks.1.attn"].rms > 0, "activation max and RMS")
  T.ok(rec.update_ratio > 0 and rec.update_ratio < 1, "update/weight ratio")
  T.ok(rec.slowest.rank >= 0 and rec.slowest.rank < world, "the slowest rank")
  lab.dist.barrier()
  if rank == 0 then
    local lines = {}
    for line in io.lines(path) do lines[#lines + 1] = line end
    T.eq(#lines, 3, "lines")
    T.ok(lines[3]:find('"step":3', 1, true) and lines[3]:find('"update_ratio":', 1, true),
      "the step's record: " .. lines[3]:sub(1, 80))
    os.remove(path)
  end
end)

T.test("forward hooks: run, replace the output, and are removed", function()
  local lin = lab.nn.Linear(3, 2)
  local seen = 0
  local h = lin:register_forward_hook(function(_, args, out)
    seen = seen + 1
    T.eq(args.n, 1, "the inputs")
    return out * 0
  end)
  local y = lin(lab.ones(1, 3))
  T.eq(seen, 1, "hook ran")
  T.eq(y:abs():sum():item(), 0, "output replaced")
  h.remove()
  h.remove()
  T.ok(lin(lab.ones(1, 3)):abs():sum():item() > 0, "removed")
  T.eq(seen, 1, "not run after removal")
end)

-- Both replica checks gather through lab.replicas.gather_checksums, which gathers the counts
-- first: ranks holding different numbers of tensors are named (the count entry), where one
-- gather of unequal lengths raised MPI_ERR_TRUNCATE on one rank and returned on the other.
T.test("different numbers of tensors: the count is what differs, on every rank", function()
  if world == 1 then return end
  local m = rank == 0 and lab.nn.Linear(2, 2) or lab.nn.Sequential(lab.nn.Linear(2, 2), lab.nn.Linear(2, 2))
  local d = lab.replicas.check(m)
  T.eq(#d, 1, "one entry")
  T.eq(d[1].name, "(the number of parameters)", "the count differs")
  if world >= 3 then T.eq(table.concat(d[1].ranks, ","), "0", "rank 0 holds fewer") end
  local c = lab.monitor.compare(rank == 0 and { { "a", lab.ones(2) } } or { { "a", lab.ones(2) }, { "b", lab.ones(2) } })
  T.eq(#c, 1, "one entry")
  T.eq(c[1].name, "(the number of tensors compared)", "monitor: the count differs")
  local same = lab.monitor.compare({ { "a", lab.ones(2) * (rank == world - 1 and 2 or 1) }, { "b", lab.ones(3) } })
  T.eq(#same, 1, "one tensor differs")
  T.eq(same[1].name, "a", "named")
  if world >= 3 then T.eq(table.concat(same[1].ranks, ","), tostring(world - 1), "the last rank") end
end)

T.finish()
