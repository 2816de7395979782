-- Lab 00: the parallel overview, answered by lab.plan.
--
-- What it shows: how each kind of parallelism cuts a model, what it costs in
-- communication, and the configurations the planner picks for a 7B model, a 70B model and
-- a run on 1000+ GPUs, guided by three questions:
--   1. does it fit in memory?     parameters, gradients, optimizer states, activations
--   2. what share is communication?  per group, per step, over which link
--   3. is the load balanced?      pipeline bubbles, expert imbalance, sequence splits
-- It runs on one rank (the planner is arithmetic); its numbers are estimates from the
-- formulas in lua/lab/plan.lua, checked against measured runs in tests/lua/test_plan_checks.lua
-- and against published trainings in tests/lua/single/test_plan.lua.
--   scripts/llmlab scripts/labs/00_parallel_overview.lua
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
print0("\nAsk your own: lab.plan{model=..., gpus=..., gpu=..., global_batch=..., seq=..., explain=true}")
print0("or from the shell: llmlab --plan model=llama3-8b gpus=128 gpu=h200 global_batch=512 seq=8192")
