-- Lab 10: diagnosing loss spikes.
--
-- What it shows: a data-parallel GPT run with two planted faults, the monitoring that
-- catches them and the evidence that tells them apart:
--   * a bad batch on one rank (step 25: rank N-1 gets a sequence of one token it has
--     never seen): that rank's loss jumps while the others' do not, and the gradient norm
--     jumps with it, mostly in the token embedding;
--   * a learning-rate mistake (step 32: the schedule returns 1000x the LR): nothing is
--     wrong at step 32 itself, but every rank's loss jumps at step 33, and the update of
--     step 32 was far larger than usual relative to the weights. (At 200x the step alone
--     lowered the loss on this easy task at 1, 3 and 4 ranks: the spike then came only
--     from the bad batch's traces in Adam's moments. 1000x spikes on its own at any count.)
-- Each spike opens one incident: the steps after it, while the loss and the gradient
-- settle (not monotonically), belong to it instead of raising alarms of their own.
-- The remedy in both cases is what large runs do: rewind to the last checkpoint, skip the
-- batch or fix the schedule, and replay. The replayed run is checked bit for bit against
-- a run that never had the faults.
--   scripts/llmlab -n 4 scripts/labs/10_loss_spikes.lua
local dist = lab.dist
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(66)
lab.print0(string.format("== Lab 10: diagnosing loss spikes, %d ranks ==", world))

local cfg = { vocab = 64, d_model = 32, n_layer = 2, n_head = 4, seq_len = 16 }
local STEPS, LR, EVERY = 40, 3e-3, 10
local run_id = lab.tensor({ os.time() % 100000 * 1000 + math.random(0, 999) }, { dtype = "i64" })
dist.broadcast(run_id, 0)
local dir = string.format("/tmp/llmlab-lab10-%d", run_id[1])

-- the data of step k on this rank: multiples of 4 (a pattern the model learns fast); the
-- planted bad batch is one token, 63, repeated
local function batch(k, faults)
  lab.manual_seed(1000 * k + rank)
  if faults.bad_batch == k and rank == world - 1 then return lab.full({ 4, cfg.seq_len }, 63, { dtype = "i64" }) end
  return lab.randint(0, cfg.vocab // 4, { 4, cfg.seq_len }) * 4
end
local function lr_at(k, faults) return faults.lr_spike == k and 1000 * LR or LR end

-- global L2 norm of a list of tensors
local function norm_of(ts)
  local s = 0
  for _, t in ipairs(ts) do s = s + t:norm():item() ^ 2 end
  return math.sqrt(s)
end

-- one training step with the numbers a monitor needs
local function step(m, k, faults)
  local ids = batch(k, faults)
  m.opt.lr = lr_at(k, faults)
  m.opt:zero_grad()
  local _, loss = m.model(ids, ids)
  loss:backward()
  local grads, by_module = {}, {}
  for _, np in ipairs(m.gpt:named_parameters()) do
    local g = np[2].grad
    grads[#grads + 1] = g
    local top = np[1]:match("^blocks%.%d+") or np[1]:match("^[^.]+")
    by_module[top] = (by_module[top] or 0) + g:norm():item() ^ 2
  end
  local before = {}
  for i, p in ipairs(m.params) do before[i] = p:clone() end
  m.opt:step()
  local deltas = {}
  for i, p in ipairs(m.params) do deltas[i] = p - before[i] end
  return { loss = loss:item(), grad_norm = norm_of(grads), by_module = by_module,
    update_ratio = norm_of(deltas) / norm_of(m.params) }
end

local function fresh()
  lab.manual_seed(7)
  local gpt = lab.nn.GPT(cfg)
  local model = lab.ddp.wrap(gpt)
  local params = model:parameters()
  return { gpt = gpt, model = model, params = params, opt = lab.optim.AdamW(params, { lr = LR }) }
end

-- every rank's losses, in rank order
local function all_losses(l)
  local t = lab.zeros(world, { dtype = "f64" })
  t[rank + 1] = l
  dist.all_reduce(t)
  return t:tolist()
end

-- A monitor as a run would have one. Early in training the loss falls fast, so a fixed
-- band around a mean would miss spikes or fire on the trend; instead a spike is the mean
-- loss over ranks rising 25% (and 0.1) above the lowest of the last five steps (training
-- does not go back up that far), or the gradient norm tripling over the last ten steps' median.
-- An alarm opens an incident. A spike takes a few steps to settle (the weights were thrown
-- off, and Adam's moments remember the step), and each of those steps would trip the same
-- thresholds again: they belong to the open incident, which closes once the loss and the
-- gradient norm have stayed under the thresholds of the step before it for CALM steps in a
-- row (the settling is not monotone). The incident's numbers stay out of the baseline, so
-- the spike does not raise the bar for the next one.
local CALM = 5
local function monitor()
  local losses, norms, incident, calm = {}, {}, nil, 0
  local function thresholds()
    local low = math.huge
    for i = #losses - 4, #losses do low = math.min(low, losses[i]) end
    local sorted = { table.unpack(norms, #norms - 9, #norms) }
    table.sort(sorted)
    return low, (sorted[5] + sorted[6]) / 2
  end
  -- returns the alarm (a string) or nil, the mean loss, and the step of the open incident
  -- this step continues (or nil)
  return function(k, s)
    local mean_loss = 0
    for _, l in ipairs(all_losses(s.loss)) do mean_loss = mean_loss + l / world end
    if #losses < 10 then
      losses[#losses + 1], norms[#norms + 1] = mean_loss, s.grad_norm
      return nil, mean_loss
    end
    local low, median = thresholds()
    local loss_up = mean_loss > 1.25 * low and mean_loss > low + 0.1
    local norm_up = s.grad_norm > 3 * median
    if incident then
      calm = (loss_up or norm_up) and 0 or calm + 1
      if calm < CALM then return nil, mean_loss, incident end
      incident = nil -- settled: the steps from here count again
    elseif loss_up or norm_up then
      incident, calm = k, 0
      local alarm = loss_up and string.format("loss %.3f (lowest of the last five %.3f)", mean_loss, low) or nil
      if norm_up then
        alarm = (alarm and alarm .. ", " or "") .. string.format("grad norm %.2f (median %.2f)", s.grad_norm, median)
      end
      return alarm, mean_loss
    end
    losses[#losses + 1], norms[#norms + 1] = mean_loss, s.grad_norm
    return nil, mean_loss
  end
end

-- 1. The run with both faults, checkpointing every ten steps
lab.print0(string.format("\n1. Training %d steps (checkpoint every %d); faults planted at steps 25 and 32:", STEPS, EVERY))
local faults = { bad_batch = 25, lr_spike = 32 }
local m = fresh()
local watch = monitor()
local alarms, history = {}, {}
for k = 1, STEPS do
  local s = step(m, k, faults)
  history[k] = s
  local alarm, mean_loss, open = watch(k, s)
  if alarm then
    alarms[#alarms + 1] = k
    lab.print0(string.format("   step %2d  ALARM: %s", k, alarm))
  elseif open then
    lab.print0(string.format("   step %2d  (incident of step %d: loss %.3f  grad norm %.2f)", k, open, mean_loss,
      s.grad_norm))
  elseif k % 5 == 0 then
    lab.print0(string.format("   step %2d  loss %.3f  grad norm %.3f  update/weight %.1e", k, mean_loss, s.grad_norm,
      s.update_ratio))
  end
  if k % EVERY == 0 then lab.ckpt.save(string.format("%s/step%d", dir, k), { model = m.gpt, optimizer = m.opt, step = k }) end
end
local function alarmed(k)
  for _, a in ipairs(alarms) do if a == k then return true end end
  return false
end
check("no alarm before step 25 (while the loss falls fast)", alarms[1] == nil or alarms[1] >= 25)
check("the monitor fires at step 25 (bad batch)", alarmed(25))
check("and at step 33 (the loss after the oversized step 32)", alarmed(33))
check("no other alarm: the steps after a spike belong to its incident", #alarms == 2)

-- 2. Telling the two apart: whose loss rose, which module's gradient, how big the update
lab.print0("\n2. The evidence at each alarm:")
local function evidence(k)
  local losses = all_losses(history[k].loss)
  local parts = {}
  for r, l in ipairs(losses) do parts[#parts + 1] = string.format("r%d %.2f", r - 1, l) end
  lab.print0(string.format("   step %d: per-rank loss  %s", k, table.concat(parts, "  ")))
  local top, top_sq, total = nil, 0, 0
  for name, sq in pairs(history[k].by_module) do
    total = total + sq
    if sq > top_sq then top, top_sq = name, sq end
  end
  lab.print0(string.format("           largest gradient share: %s (%.0f%% of the squared norm)", top, 100 * top_sq / total))
  lab.print0(string.format("           update/weight of the step before: %.1e (typical %.1e)",
    history[k - 1].update_ratio, history[k - 5].update_ratio))
  return losses, top
end
local l25, top25 = evidence(25)
local sorted = { table.unpack(l25) }
table.sort(sorted)
local outlier = l25[world] > 2 * sorted[math.max(1, world - 1)] or world == 1
lab.print0("   -> step 25: one rank's loss alone: its data. Rewind, skip that batch.")
check("step 25: rank " .. (world - 1) .. "'s loss is the outlier", outlier)
check("step 25: the token embedding carries the gradient spike", top25 == "wte")
local l33 = evidence(33)
local all_up = true
for r = 1, world do all_up = all_up and l33[r] > history[31].loss + 0.5 end
lab.print0("   -> step 33: every rank at once, after an unusually large step: the optimizer. Fix the LR.")
check("step 33: every rank's loss rose together", all_up)
check("step 32's update was over 10x the usual size", history[32].update_ratio > 10 * history[27].update_ratio)

-- 3. The remedy: rewind to step 20, skip step 25's batch, fix the LR at 32, replay to the
-- end. A run that never had the faults must give the same weights, bit for bit.
lab.print0("\n3. Rewind to step 20, skip batch 25, fix the schedule, replay:")
local fixed = { skip = 25 }
local replay = fresh()
local state = lab.ckpt.load(dir .. "/step20", { model = replay.gpt, optimizer = replay.opt })
local replay_losses = {}
for k = state.step + 1, STEPS do
  if k ~= fixed.skip then replay_losses[k] = step(replay, k, {}).loss end
end
local clean = fresh()
local clean_losses = {}
for k = 1, STEPS do
  if k ~= fixed.skip then clean_losses[k] = step(clean, k, {}).loss end
end
local same = true
for k = 21, STEPS do
  if k ~= fixed.skip then same = same and replay_losses[k] == clean_losses[k] end
end
local function mean(l)
  local s = 0
  for _, v in ipairs(all_losses(l)) do s = s + v / world end
  return s
end
lab.print0(string.format("   mean loss at step %d: faulty run %.4f, replayed %.4f, never-faulty %.4f", STEPS,
  mean(history[STEPS].loss), mean(replay_losses[STEPS]), mean(clean_losses[STEPS])))
lab.print0("   (the replay is exactly the run without the faults, so its curve can be trusted again)")
check("the replay equals the run that never had the faults, bit for bit", same)
dist.barrier()
if rank == 0 then os.execute("rm -rf '" .. dir .. "'") end
finish("lab 10")
