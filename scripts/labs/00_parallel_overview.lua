-- Lab 00: the parallel overview, answered by lab.plan.
--
-- What it shows: how each kind of parallelism cuts a model, what it costs in
-- communication, and the configurations the planner picks for a 7B model, a 70B model and
-- a run on 1000+ GPUs, guided by three questions:
--   1. does it fit in memory?     parameters, gradients, optimizer states, activations
--   2. what share is communication?  per group, per step, over which link
--   3. is the load balanced?      pipeline bubbles, expert imbalance, sequence splits
-- The planner's part runs on rank 0 (it is arithmetic); its numbers are estimates from the
-- formulas in lua/lab/plan.lua, checked against measured runs in tests/lua/test_plan_checks.lua
-- and against published trainings in tests/lua/single/test_plan.lua.
-- The last part runs for real on every rank (1-4): a small GPT on a 4D grid
-- (lab.dist.grid: tp x pp x dp, with ep inside dp) whose groups are printed and whose loss
-- is checked against one rank, and a MoE GPT with experts over EP whose measured expert
-- load answers question 3 beside the planner's imbalance term.
--   scripts/llmlab -n 4 scripts/labs/00_parallel_overview.lua
local plan = lab.plan
local print0 = lab.print0
local function gb(x) return string.format("%.1f GB", x / 1e9) end

print0([[
== Lab 00: how to cut a model ==

  data parallel (DP)      every GPU holds the whole model and a slice of the batch;
                          gradients are all-reduced: 2(d-1)/d x (gradient bytes) per step.
  ZeRO / FSDP             DP that shards what DP replicates: optimizer states (stage 1),
                          gradients (2), parameters (3, all-gathered around each layer,
                          1.5x DP's traffic).
  tensor parallel (TP)    each layer's matrices are split (column then row): one all-reduce
                          of b*s*h per sub-layer, forward and backward -> stays in a node.
  sequence parallel (SP)  with TP, the LayerNorm/dropout regions split the sequence instead:
                          same traffic as TP (all-gather + reduce-scatter), activations / t.
  pipeline parallel (PP)  layers split into stages, micro-batches flow through; point-to-
                          point sends of b*s*h, a bubble of (p-1)/(v m) of the step idle.
  context parallel (CP)   the sequence split across GPUs for attention; K and V are passed
                          around (ring attention): for very long sequences.
  expert parallel (EP)    a mixture-of-experts layer's experts spread over GPUs; tokens go to
                          their experts and back with two all-to-alls.
]])

local cases = {
  { "7B: Llama-2 7B on 64 A100-80GB, 4M tokens per batch", { model = "llama2-7b", gpus = 64, gpu = "a100-80",
    global_batch = 1024, seq = 4096 } },
  { "70B: Llama-3 70B on 512 H100, 8M tokens per batch", { model = "llama3-70b", gpus = 512, gpu = "h100",
    global_batch = 1024, seq = 8192 } },
  { "1000+ GPUs: Llama-3 405B on 8192 H100 (Meta's published layout: tp8 pp16 dp64)", { model = "llama3-405b",
    gpus = 8192, gpu = "h100", global_batch = 2048, seq = 8192, tp = 8, zero = { 1, 2, 3 } } },
  { "MoE: Mixtral-style 8x7B on 64 H100, experts across GPUs", { model = "mixtral-8x7b", gpus = 64, gpu = "h100",
    global_batch = 512, seq = 4096 } },
}

print0("\nThe answers below are lab.plan's model of each run (formulas, not measurements here).")
for i, case in ipairs(cases) do
  print0(string.format("\n-- %d. %s --", i, case[1]))
  if lab.dist.rank() == 0 then
    local o = case[2]
    o.top = 5
    local results = plan(o)
    local best = results[1]
    if best then
      print(string.format("   1. fits: %s of %s per GPU (params %s, grads %s, optimizer %s, activations %s)",
        gb(best.mem_total), gb(lab.plan_presets.gpus[o.gpu].hbm), gb(best.mem_params), gb(best.mem_grads),
        gb(best.mem_optimizer), gb(best.mem_activations)))
      print(string.format("   2. communication per GPU per step: TP %s, DP %s, PP %s, EP %s; exposed %.0f%% of the step",
        gb(best.bytes_tp), gb(best.bytes_dp), gb(best.bytes_pp), gb(best.bytes_ep), 100 * best.comm_share))
      print(string.format("   3. balance: pipeline bubble %.1f%% with %d micro-batches; MFU %.0f%%, %.0f tokens/s",
        100 * best.bubble, best.microbatches, 100 * best.mfu, best.tokens_per_s))
    end
  end
end
-- ---- a real 4D run here ----
local world, rank = lab.dist.world(), lab.dist.rank()
local check, finish = lab.checker(66)
local dims = ({ { tp = 1, pp = 1 }, { tp = 1, pp = 2 }, nil, { tp = 2, pp = 2 } })[world] or { tp = 1, pp = world }
local grid = lab.dist.grid { tp = dims.tp, pp = dims.pp }
print0(string.format("\n-- 5. A real run on this machine: tp %d x pp %d x dp %d x ep %d over %d rank(s) (Megatron order: tp fastest) --",
  grid.tp, grid.pp, grid.dp, grid.ep, world))
print0("   tp_group: ranks that split each layer's matrices (all-reduce per sub-layer)")
print0("   pp_group: the stages a micro-batch passes through (send/recv of activations)")
print0("   dp_group: replicas that all-reduce gradients; ep_group: ranks sharing one MoE layer's experts")
for r, line in ipairs(lab.dist.gather_strings(grid:describe())) do
  print0(string.format("   rank %d: %s", r - 1, line))
end
local cfg = { vocab = 32, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8, d_ff = 32, tied = false }
lab.manual_seed(3)
local twin = lab.nn.GPT(cfg)
lab.manual_seed(3)
local tpm = lab.tp.GPT(cfg, { group = grid.tp_group })
local stages = lab.pp.partition(lab.pp.gpt_pieces(tpm), grid.pp)
local pipe = lab.pp.Pipeline(stages[grid.pp_rank + 1], { group = grid.pp_group, micro_batches = 2 * grid.pp,
  loss = function(logits, t) return lab.tp.vocab_parallel_cross_entropy(logits, t, grid.tp_group) end,
  activation_shape = function(mb) return { mb, 8, 16 } end })
lab.manual_seed(8)
local ids = lab.randint(0, 32, { 4 * grid.pp, 8 }) -- two sequences per micro-batch
local opt, topt = lab.optim.AdamW(pipe:parameters(), { lr = 1e-2 }), lab.optim.AdamW(twin:parameters(), { lr = 1e-2 })
local worst = 0
for step = 1, 3 do
  topt:zero_grad()
  local _, lt = twin(ids, ids)
  lt:backward()
  topt:step()
  opt:zero_grad()
  local l = pipe:train_step(ids, ids)
  opt:step()
  worst = math.max(worst, math.abs(l - lt:item()))
  print0(string.format("   step %d: loss %.6f (one rank: %.6f)", step, l, lt:item()))
end
check("the 4D-grid GPT trains as one rank does (3 AdamW steps, 1e-5)", worst < 1e-5)

-- question 3 from a measured run: a MoE GPT with its experts over ep = world (8 experts;
-- 6 at 3 ranks, so that they split evenly)
local NE = world == 3 and 6 or 8
print0(string.format("\n-- 6. Is the load balanced? A MoE GPT (%d experts, top-2, no dropping) with ep %d, 20 steps --", NE, world))
local eg = lab.dist.grid { ep = world }
local mcfg = { vocab = 32, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8, d_ff = 32,
  moe = { experts = NE, top_k = 2, every = 1, group = eg.ep_group } }
lab.manual_seed(5)
local moe_gpt = lab.nn.GPT(mcfg)
local mopt = lab.optim.AdamW(moe_gpt:parameters(), { lr = 1e-2 })
lab.manual_seed(50 + rank)
local stats
for _ = 1, 20 do
  local x = lab.randint(0, 32, { 4, 8 })
  mopt:zero_grad()
  select(2, moe_gpt(x, x)):backward()
  lab.moe.sync_gradients(moe_gpt, { dp_group = eg.dp_group, expert_dp_group = eg.edp_group })
  mopt:step()
  stats = lab.moe.stats(moe_gpt, { group = eg.ep_group })
end
local load = 0 -- the busiest EP rank's tokens over the mean, worst layer, last step
for i, ly in ipairs(stats.layers) do
  local per_rank, El = {}, NE // world
  for e, c in ipairs(ly.tokens_per_expert) do
    local r = (e - 1) // El + 1
    per_rank[r] = (per_rank[r] or 0) + c
  end
  local mx, sum = 0, 0
  for _, c in ipairs(per_rank) do mx, sum = math.max(mx, c), sum + c end
  load = math.max(load, mx / (sum / #per_rank))
  print0(string.format("   layer %d: tokens per expert %s (max/mean %.2f); per EP rank %s", i,
    table.concat(ly.tokens_per_expert, " "), ly.imbalance, table.concat(per_rank, " ")))
end
print0(string.format("   measured: the busiest EP rank holds %.2fx the mean load (1.00 = balanced)", load))
print0(load <= 1.1 and "   answer: yes, within 10% of the mean"
  or string.format("   answer: no, the busiest EP rank has %.0f%% more tokens than the mean, and the all-to-alls wait for it", 100 * (load - 1)))
if rank == 0 then
  local base = { model = "mixtral-8x7b", gpus = 64, gpu = "h100", global_batch = 512, seq = 4096, ep = 8 }
  local bal = plan.enumerate(base)[1]
  base.expert_imbalance = math.max(1, math.min(load, 8))
  local imb = plan.enumerate(base)[1]
  if bal and imb then
    print(string.format("   the planner, Mixtral 8x7B on 64 H100 with ep 8: step %.2f s balanced, %.2f s at the measured %.2fx load",
      bal.step_s, imb.step_s, base.expert_imbalance))
  end
end
check("the MoE run measured a load (every token routed)", stats.routed > 0 and load >= 1)
finish("lab 00")

print0("\nAsk your own: lab.plan{model=..., gpus=..., gpu=..., global_batch=..., seq=..., explain=true}")
print0("or from the shell: llmlab --plan model=llama3-8b gpus=128 gpu=h200 global_batch=512 seq=8192")
