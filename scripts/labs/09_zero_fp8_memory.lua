-- Lab 09: ZeRO and FP8 memory accounting.
--
-- What it shows: where the bytes of data-parallel training go and what each ZeRO stage
-- removes. Mixed-precision Adam holds 16 bytes per parameter on every replica: 2 for the
-- bf16 weights, 2 for their gradients, K = 12 for the fp32 master, momentum and variance.
-- ZeRO-1 shards the 12 over the N data-parallel ranks, ZeRO-2 also the gradients, ZeRO-3
-- also the weights (gathered per module while it computes). The lab (1) recomputes the
-- ZeRO paper's Figure 1 from those formulas, (2) trains a GPT here with DDP and ZeRO 1-3
-- and checks each rank's measured bytes against the same formulas and the losses against
-- DDP's, and (3) prints the planner's model of what FP8 would change for Llama 3 8B (the
-- matmul peak doubles, the 16 bytes of weight state per parameter do not shrink): formula
-- output, labelled so, since llmlab computes no FP8.
--   scripts/llmlab -n 4 scripts/labs/09_zero_fp8_memory.lua
local dist = lab.dist
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(66)
lab.print0(string.format("== Lab 09: ZeRO and FP8 memory accounting, %d ranks ==", world))

-- 1. ZeRO (Rajbhandari et al., SC'20), Figure 1: a 7.5B model, 64 data-parallel GPUs,
-- mixed-precision Adam. Published per-GPU figures: 120, 31.4, 16.6 and 1.9 GB.
lab.print0("\n1. The ZeRO paper's Figure 1 (7.5B parameters, N_d = 64, K = 12), recomputed:")
local published = { [0] = 120, 31.4, 16.6, 1.9 }
local names = { [0] = "baseline (DDP)", "ZeRO-1: P_os", "ZeRO-2: P_os+g", "ZeRO-3: P_os+g+p" }
local all_match = true
for stage = 0, 3 do
  local e = lab.mem.estimate { params = 7.5e9, mixed_precision = true, zero = stage, dp = 64 }
  local gb = e.total / 1e9
  lab.print0(string.format("   %-18s %7.1f GB per GPU  (paper: %5.1f)   %5.2f bytes/param", names[stage], gb,
    published[stage], e.bytes_per_param))
  all_match = all_match and math.abs(gb - published[stage]) < 0.05 * published[stage] + 0.05
end
check("the formulas reproduce the paper's four figures", all_match)

-- 2. Measured here: one GPT, trained three steps with DDP and with each ZeRO stage over
-- every rank (fp32 Adam: 4 + 4 + 8 bytes per parameter before sharding).
local cfg = { vocab = 64, d_model = 32, n_layer = 2, n_head = 4, seq_len = 16, tied = false }
local function tag_bytes()
  collectgarbage()
  collectgarbage()
  local t = lab.mem.stats().tags
  return { params = t.param.current, grads = t.grad.current, optimizer = t.optimizer.current }
end
local function train(stage)
  local base = tag_bytes()
  lab.manual_seed(1)
  local gpt = lab.nn.GPT(cfg)
  local n_params = gpt:num_parameters()
  local model, opt
  if stage == 0 then
    model = lab.ddp.wrap(gpt)
    opt = lab.optim.AdamW(model:parameters(), { lr = 1e-3 })
  else
    model = lab.zero.wrap(gpt, { stage = stage, lr = 1e-3 })
    opt = model
  end
  local losses, grads = {}, 0
  for k = 1, 3 do
    lab.manual_seed(100 * k + rank)
    local ids = lab.randint(0, cfg.vocab, { 2, cfg.seq_len })
    opt:zero_grad()
    local _, loss = model(ids, ids)
    loss:backward()
    grads = tag_bytes().grads - base.grads -- after backward, before the step frees or keeps them
    opt:step()
    local l = lab.tensor({ loss:item() }, { dtype = "f64" })
    dist.all_reduce(l)
    losses[k] = l[1] / world
  end
  local now = tag_bytes()
  return { params = now.params - base.params, grads = grads, optimizer = now.optimizer - base.optimizer },
    losses, n_params
end
lab.print0(string.format("\n2. Measured on each rank here (GPT, fp32 AdamW, %d-way data parallel), KiB:", world))
lab.print0(string.format("   %-8s %21s %21s %21s   %s", "", "params meas/formula", "grads meas/formula",
  "optimizer meas/form.", "loss 3"))
local ddp_losses
for stage = 0, 3 do
  local m, losses, n_params = train(stage)
  ddp_losses = ddp_losses or losses
  local e = lab.mem.estimate { params = n_params, dtype = "f32", zero = stage, dp = world }
  -- the largest deviation over ranks (sharding pads to equal shards)
  local worst = lab.tensor({ math.abs(m.params - e.params) / e.params, math.abs(m.grads - e.grads) / e.grads,
    math.abs(m.optimizer - e.optimizer) / e.optimizer }, { dtype = "f64" })
  dist.all_reduce(worst, { op = "max" })
  lab.print0(string.format("   %-8s %10.1f / %8.1f %10.1f / %8.1f %10.1f / %8.1f   %.6f",
    stage == 0 and "DDP" or "ZeRO-" .. stage, m.params / 1024, e.params / 1024, m.grads / 1024, e.grads / 1024,
    m.optimizer / 1024, e.optimizer / 1024, losses[3]))
  check(string.format("%s: every rank's bytes within 5%% of the formula (worst %.1f%%)",
    stage == 0 and "DDP" or "ZeRO-" .. stage, 100 * math.max(worst[1], worst[2], worst[3])),
    worst[1] < 0.05 and worst[2] < 0.05 and worst[3] < 0.05)
  if stage > 0 then
    check(string.format("ZeRO-%d trains like DDP (loss 3: %.6f vs %.6f)", stage, losses[3], ddp_losses[3]),
      math.abs(losses[3] - ddp_losses[3]) < 1e-4)
  end
end

-- 3. FP8 (as in NVIDIA's Transformer Engine and DeepSeek-V3): the matmuls read 1-byte
-- inputs and run at up to twice the bf16 peak, but the optimizer still keeps fp32 masters
-- and moments and the weights stay in bf16, so the weight state is the same 16 bytes per
-- parameter. llmlab has no FP8 compute, so nothing here can be measured: these rows are
-- the planner's model (its fp8 peak and its byte counts), printed as such and not checked,
-- since a check of the planner against its own inputs could not fail.
lab.print0("\n3. Llama 3 8B, 64 x H100-80GB, 512 sequences of 8192 tokens per step: lab.plan's model,")
lab.print0("   not a measurement (llmlab computes no FP8; the fp8 row assumes the GPU's fp8 peak):")
lab.print0(string.format("   %-6s %-22s %10s %14s %9s %14s", "", "best layout", "GB/GPU", "weight state", "step s",
  "tokens/s"))
local best = {}
for _, precision in ipairs({ "bf16", "fp8" }) do
  local r = lab.plan.enumerate { model = "llama3-8b", gpus = 64, gpu = "h100-80", global_batch = 512, seq = 8192,
    precision = precision }[1]
  best[precision] = r
  lab.print0(string.format("   %-6s dp %d tp %d pp %d zero %d %10.1f %11.1f GB %9.2f %14.0f", precision, r.dp, r.tp,
    r.pp, r.zero, r.mem_total / 1e9, (r.mem_params + r.mem_grads + r.mem_optimizer) / 1e9, r.step_s, r.tokens_per_s))
end
lab.print0(string.format("   in the model the fp8 step is %.2fx shorter: only its matmuls speed up (fp8 peak, 1-byte",
  best.bf16.step_s / best.fp8.step_s))
lab.print0("   operands), not attention, communication or the optimizer; the weight state is the same.")
finish("lab 09")
