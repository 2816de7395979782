-- Lab 14: mixture of experts and expert parallelism.
--
-- What it shows, measured here:
--   1. Gating and capacity. A router sends each token to its top-k experts; an expert takes
--      at most C = ceil(capacity_factor x tokens x k / E) tokens and drops the rest (they
--      pass through the residual only). Drop rate against capacity factor, top-1 (Switch)
--      and top-2 (GShard), for a freshly initialised router.
--   2. Load balance. A short training run of a small MoE GPT with and without Switch's
--      load-balancing loss E * sum_i f_i P_i: tokens per expert, max/mean imbalance and drop
--      rate at the end.
--   3. Expert parallelism moves tokens with all_to_all_single: dispatch and combine, forward
--      and backward. The bytes MPI was handed, counted by lab.dist, against the planner's
--      formula (lab.plan.ep_all_to_all_bytes).
--   4. Equivalence: the EP model against one rank holding every expert (each rank's tokens a
--      capacity group, so the same tokens drop): every parameter's gradient.
-- Runs at 1-4 ranks; experts are split over all ranks (EP = world), 8 experts so 1, 2 and 4
-- divide them. At 1 rank there is no all-to-all (EP = 1) and section 3 shows 0 = 0.
--   scripts/llmlab -n 4 scripts/labs/14_moe_expert_parallel.lua
local dist = lab.dist
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(66)
local ep_group = dist.world_group()
lab.print0(string.format("== Lab 14: mixture of experts, expert parallelism over %d rank(s) ==", world))
if 8 % world ~= 0 then -- the 8 experts are split evenly over all ranks (EP = world)
  lab.print0(string.format("lab 14 does not run on %d ranks: its 8 experts split evenly over 1, 2, 4 or 8 ranks only", world))
  return
end

-- 1. drop rate vs capacity factor
local E, D = 8, 32
lab.print0(string.format("\n1. Drop rate against capacity factor: %d experts, %d tokens per rank, fresh router", E, 256))
lab.print0(string.format("   %-10s %12s %12s", "capacity", "top-1 drops", "top-2 drops"))
local rates = {}
for _, cf in ipairs({ 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, false }) do
  local row = {}
  for k = 1, 2 do
    lab.manual_seed(100 + k)
    local layer = lab.moe.MoE(D, { experts = E, top_k = k, capacity_factor = cf or nil, d_ff = 16 })
    lab.manual_seed(7 + rank) -- each rank its own tokens
    lab.no_grad(function() layer(lab.randn(256, D)) end)
    local st = lab.moe.stats(layer, { group = ep_group })
    row[k] = st.drop_rate
  end
  rates[#rates + 1] = { cf = cf, row = row }
  lab.print0(string.format("   %-10s %11.1f%% %11.1f%%", cf and string.format("%.2f", cf) or "no drop", 100 * row[1], 100 * row[2]))
end
local monotone = true
for i = 2, #rates do
  for k = 1, 2 do monotone = monotone and rates[i].row[k] <= rates[i - 1].row[k] end
end
check("drop rate never rises with the capacity factor", monotone)
check("without a capacity factor nothing drops", rates[#rates].row[1] == 0 and rates[#rates].row[2] == 0)

-- 2. load balance with and without the aux loss
local task = lab.data.copy_task(6, 10)
local function config(aux)
  return { vocab = task.vocab, d_model = D, n_layer = 2, n_head = 2, seq_len = task.seq_len, d_ff = 32,
    moe = { experts = E, top_k = 2, every = 1, capacity_factor = 1.25, group = ep_group, aux_loss_coef = aux } }
end
local STEPS, B = 30, 8
lab.print0(string.format("\n2. Load balance over a %d-step run (copy task, top-2, capacity 1.25, batch %d per rank):", STEPS, B))
lab.print0(string.format("   %-16s %10s %12s %10s   %s", "aux loss coef", "final loss", "max/mean", "dropped", "tokens per expert (layer 1, last step)"))
local runs = {}
for _, aux in ipairs({ 0, 0.1 }) do
  lab.manual_seed(42)
  local model = lab.nn.GPT(config(aux))
  local opt = lab.optim.AdamW(model:parameters(), { lr = 3e-3 })
  local imb, drop, loss = 0, 0, 0
  lab.manual_seed(1000 + rank)
  dist.reset_stats()
  for step = 1, STEPS do
    local ids, tg = task.batch(B)
    opt:zero_grad()
    local _, l = model(ids, tg)
    l:backward()
    lab.moe.sync_gradients(model, { dp_group = ep_group })
    opt:step()
    local st = lab.moe.stats(model, { group = ep_group })
    if step > STEPS - 5 then -- the last five steps
      local worst = 0
      for _, ly in ipairs(st.layers) do worst = math.max(worst, ly.imbalance) end
      imb, drop = imb + worst / 5, drop + st.drop_rate / 5
    end
    loss = l:item()
    runs[aux] = { imbalance = imb, drop = drop, stats = st, model = model, bytes = dist.stats(), steps = step }
  end
  local avg = lab.tensor({ loss }, { dtype = "f64" })
  dist.all_reduce(avg, { op = "avg" })
  lab.print0(string.format("   %-16s %10.4f %12.2f %9.1f%%   %s", tostring(aux), avg[1], imb, 100 * drop,
    table.concat(runs[aux].stats.layers[1].tokens_per_expert, " ")))
end
lab.print0(string.format("   max/mean is the busiest expert's tokens over the mean (1 = balanced), worst layer, mean of the last 5 steps;"))
lab.print0(string.format("   measured here: %.2f without the aux loss, %.2f with it.", runs[0].imbalance, runs[0.1].imbalance))
check("both runs trained without NaN", runs[0].imbalance == runs[0].imbalance and runs[0.1].imbalance == runs[0.1].imbalance)

-- 3. all-to-all volume against the formula
local run = runs[0.1]
local layer = lab.moe.layers(run.model)[1]
local tokens = B * task.seq_len
local per_step = 0
local st = run.bytes.world or {}
if st.all_to_all_single then per_step = st.all_to_all_single.wire_bytes / run.steps end
local formula = #lab.moe.layers(run.model) * 4 * lab.plan.ep_all_to_all_bytes(tokens, D, 2, world, 4, 1.25, E, 1)
lab.print0(string.format("\n3. All-to-all bytes leaving each rank per step (%d MoE layers x 4: dispatch, combine, forward, backward):", #lab.moe.layers(run.model)))
lab.print0(string.format("   measured by lab.dist %s, planner %s = layers x 4 x %d x %d rows x %d x 4 B x (%d-1)/%d",
  lab.format_bytes(per_step), lab.format_bytes(formula), E, layer.capacity, D, world, world))
check("measured all-to-all bytes equal the planner's formula exactly", math.abs(per_step - formula) < 0.5)

-- 4. equivalence with one rank holding every expert
lab.manual_seed(77)
local twin_cfg = config(0.1)
twin_cfg.moe = setmetatable({ group = false, groups = world }, { __index = twin_cfg.moe })
local twin = lab.nn.GPT(twin_cfg)
local model = lab.nn.GPT(config(0.1))
lab.moe.copy_from_full(model, twin)
lab.manual_seed(5)
local ids, tg = task.batch(B * world)
select(2, twin(ids, tg)):backward()
select(2, model(ids:narrow(1, rank * B + 1, B):contiguous(), tg:narrow(1, rank * B + 1, B):contiguous())):backward()
lab.moe.sync_gradients(model, { dp_group = ep_group })
local worst, count = 0, 0
local tw = {}
for _, np in ipairs(twin:named_parameters()) do tw[np[1]] = np[2] end
for _, np in ipairs(model:named_parameters()) do
  local p = np[2]
  local want = lab.moe.slice_of(p, tw[np[1]].grad)
  worst = math.max(worst, lab.max_abs_diff(p.grad, want))
  count = count + 1
end
local w = lab.tensor({ worst }, { dtype = "f64" })
dist.all_reduce(w, { op = "max" })
lab.print0(string.format("\n4. EP=%d against one rank with all %d experts: %d parameters, largest gradient difference %.2e",
  world, E, count, w[1]))
check("every gradient equals the single-rank twin's (1e-5)", w[1] < 1e-5 and count == #twin:named_parameters())
finish("lab 14")
