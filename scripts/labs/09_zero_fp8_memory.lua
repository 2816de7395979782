-- Lab 09: ZeRO and FP8 memory accounting.
--
-- What it shows: where the bytes of data-parallel training go and what each ZeRO stage
-- removes. Mixed-precision Adam holds 16 bytes per parameter on every replica: 2 for the
-- bf16 weights, 2 for their gradients, K = 12 for the fp32 master, momentum and variance.
-- ZeRO-1 shards the 12 over the N data-parallel ranks, ZeRO-2 also the gradients, ZeRO-3
-- also the weights (gathered per module while it computes). The lab (1) recomputes the
-- ZeRO paper's Figure 1 from those formulas, (2) trains a GPT here with DDP and ZeRO 1-3
-- and checks each rank's measured bytes against the same formulas and the losses against
-- DDP's, (3) trains a small GPT in FP8 (lab.amp with delayed scaling: e4m3 weights and
-- activations, e5m2 gradients, products computed from the FP8 values) beside bf16 and f32 on
-- the same data and seed, and measures its bytes per parameter, shows a Linear's amax history
-- and scales, and plants an outlier to show why delayed scaling keeps a history, and (4)
-- prints the planner's model of what FP8 would change for Llama 3 8B on H100s (the matmul peak
-- doubles, the 16 bytes of weight state per parameter do not shrink): formula output,
-- labelled so, since there are no FP8 tensor cores here to time.
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

-- 3. FP8 measured here. The same GPT and batches trained in f32, in bf16 (lab.amp: fp32
-- masters) and in FP8 (the same plus lab.amp.DelayedScaling: every Linear's x and W cast to
-- e4m3 and its output gradient to e5m2, per-tensor scales from the amax history), data
-- parallel over every rank.
local fcfg = { vocab = 64, d_model = 32, n_layer = 2, n_head = 4, seq_len = 16 }
local FSTEPS = 40
local function train_precision(precision, recipe)
  local base = tag_bytes()
  lab.manual_seed(3)
  local gpt = lab.nn.GPT(fcfg)
  local n_params = gpt:num_parameters()
  local adamw = function(ps) return lab.optim.AdamW(ps, { lr = 3e-3 }) end
  local mp = precision ~= "f32" and lab.amp.MixedPrecision(gpt, { dtype = "bf16", optimizer = adamw, fp8 = recipe }) or nil
  local model = lab.ddp.wrap(gpt)
  local opt = not mp and adamw(model:parameters()) or nil
  local losses = {}
  for k = 1, FSTEPS do
    lab.manual_seed(500 + k)
    local ids = lab.randint(0, fcfg.vocab // 4, { 2 * world, fcfg.seq_len }):narrow(1, 2 * rank + 1, 2) * 4
    local _, loss = model(ids, ids)
    if mp then
      mp:zero_grad()
      mp:backward(loss)
      mp:step()
    else
      opt:zero_grad()
      loss:backward()
      opt:step()
    end
    local l = lab.tensor({ loss:item() }, { dtype = "f64" })
    dist.all_reduce(l, { op = "avg" })
    losses[k] = l[1]
  end
  local now = tag_bytes()
  -- bytes per parameter, measured: the tagged tensors that live between steps (gradients are
  -- kept until the next zero_grad, so they are counted here too)
  local per = { params = (now.params - base.params) / n_params, grads = (now.grads - base.grads) / n_params,
    optimizer = (now.optimizer - base.optimizer) / n_params }
  return losses, per, mp, gpt
end
lab.print0(string.format("\n3. FP8 training measured here: a GPT (%d layers, d_model %d), the same batches and seed,", fcfg.n_layer,
  fcfg.d_model))
lab.print0(string.format("   %d-way data parallel; loss averaged over ranks:", world))
local recipe = lab.amp.DelayedScaling { amax_history_len = 16, margin = 0, fp8_format = "hybrid" }
local runs = {}
for _, precision in ipairs({ "f32", "bf16", "fp8" }) do
  local losses, per, mp, gpt = train_precision(precision, precision == "fp8" and recipe or nil)
  runs[precision] = { losses = losses, per = per, mp = mp, gpt = gpt }
end
lab.print0(string.format("   %-6s %s", "step", "f32        bf16       fp8"))
for _, k in ipairs({ 1, 5, 10, 20, 30, FSTEPS }) do
  lab.print0(string.format("   %-6d %.6f   %.6f   %.6f", k, runs.f32.losses[k], runs.bf16.losses[k], runs.fp8.losses[k]))
end
local l32, l8, l16 = runs.f32.losses[FSTEPS], runs.fp8.losses[FSTEPS], runs.bf16.losses[FSTEPS]
check(string.format("f32 learns (%.3f -> %.3f)", runs.f32.losses[1], l32), l32 < runs.f32.losses[1] - 1)
check(string.format("FP8 follows f32 within 3%% at step %d (%.4f vs %.4f, %.2f%%)", FSTEPS, l8, l32,
  100 * math.abs(l8 - l32) / l32), math.abs(l8 - l32) < 0.03 * l32)
check(string.format("bf16 too (%.4f, %.2f%%), and FP8 is not bf16 relabelled", l16, 100 * math.abs(l16 - l32) / l32),
  math.abs(l16 - l32) < 0.03 * l32 and l8 ~= l16)

-- bytes per parameter, measured from the tagged tensors, and the FP8 operands' storage
lab.print0("\n   bytes per parameter, measured (lab.mem tags between steps; FP8 copies from the tensors):")
lab.print0(string.format("   %-6s %8s %8s %10s %8s", "", "weights", "grads", "optimizer", "total"))
for _, precision in ipairs({ "f32", "bf16", "fp8" }) do
  local p = runs[precision].per
  lab.print0(string.format("   %-6s %8.2f %8.2f %10.2f %8.2f", precision, p.params, p.grads, p.optimizer,
    p.params + p.grads + p.optimizer))
end
local fp8_bytes, fp8_numel = 0, 0
for _, m in ipairs(recipe.metas) do
  if m.name:match("%.weight$") then fp8_bytes, fp8_numel = fp8_bytes + m.bytes, fp8_numel + m.numel end
end
lab.print0(string.format("   fp8 weight copies cast for the products: %d bytes for %d weights = %.2f B each (e4m3),",
  fp8_bytes, fp8_numel, fp8_bytes / fp8_numel))
lab.print0("   made per step and held only until backward; the optimizer state does not shrink")
local p8 = runs.fp8.per
check(string.format("FP8 training keeps 2 + 2 + 12 B/param like bf16 (measured %.2f)", p8.params + p8.grads + p8.optimizer),
  math.abs(p8.params - 2) < 0.01 and math.abs(p8.grads - 2) < 0.01 and math.abs(p8.optimizer - 12) < 0.01)
check("the GEMM operands are 1 byte each", fp8_bytes == fp8_numel and fp8_numel > 0)

-- the amax history and scale of one Linear (its x, W and output gradient)
local fc = runs.fp8.gpt.blocks:at(1).mlp.fc
lab.print0("\n   blocks.1.mlp.fc after the run (scale = fp8 max / max(history of 16 amaxes), reduced over ranks):")
for _, m in ipairs({ fc.fp8_x, fc.fp8_w, fc.fp8_g }) do
  local h = m:amax_history()
  local tail = {}
  for i = #h - 3, #h do tail[#tail + 1] = string.format("%.4g", h[i]) end
  lab.print0(string.format("   %-24s %s  scale %-10.5g amax %-9.4g last amaxes %s  clipped %d", m.name:gsub("^blocks%.1%.mlp%.", ""),
    m.format, m.scale, m.amax, table.concat(tail, " "), m.clipped))
end
check("each scale is its format's max over the history's largest amax",
  math.abs(fc.fp8_w.scale * fc.fp8_w.amax - 448) < 1e-9 and math.abs(fc.fp8_g.scale * fc.fp8_g.amax - 57344) < 1e-6)

-- A planted outlier: a Linear in FP8 whose input carries one value 50x the rest at steps 8,
-- 11 and 14. The scale for a step comes from earlier steps' amaxes, so the first outlier is
-- clipped to 448 / scale whatever the history; with a 16-step history the scale then stays
-- low and the recurring outliers fit; with a 1-step history the scale springs back after each
-- outlier and each one is clipped again (and any ordinary growth of the amax clips too: step
-- 7). Error: sum |y - y_f32| / sum |y_f32| over the batch, y_f32 from the f32 input and weight.
lab.print0("\n   A planted outlier (x carries one value 50x the rest at steps 8, 11, 14), one Linear in FP8:")
lab.print0(string.format("   %-5s %9s | %-32s | %-32s", "step", "x amax", "history 16: scale  clipped  error", "history 1: scale  clipped  error"))
local function outlier_run(len)
  lab.manual_seed(11)
  local lin = lab.nn.Linear(16, 8)
  local w32 = lin.weight:clone()
  local mp = lab.amp.MixedPrecision(lin, { dtype = "bf16", optimizer = function(ps) return lab.optim.SGD(ps, { lr = 0 }) end,
    fp8 = lab.amp.DelayedScaling { amax_history_len = len } })
  local rows = {}
  for step = 1, 16 do
    lab.manual_seed(40 + step)
    local x = lab.randn(8, 16)
    if step == 8 or step == 11 or step == 14 then x[1][1] = 50 * x:abs():max():item() end
    local scale, before = lin.fp8_x.scale, lin.fp8_x.clipped
    mp:zero_grad()
    local y = lin(x:to("bf16"))
    mp:backward(y:to("f32"):sum())
    mp:step()
    local ref = x:matmul(w32:t()) + lin.bias:to("f32")
    local err = (y:to("f32") - ref):abs():sum():item() / ref:abs():sum():item()
    rows[step] = { amax = x:abs():max():item(), scale = scale, clipped = lin.fp8_x.clipped - before, err = err }
  end
  return rows
end
local long, short = outlier_run(16), outlier_run(1)
for step = 6, 16 do
  local a, b = long[step], short[step]
  lab.print0(string.format("   %-5d %9.3f | %10.4g %6d %12.4f | %10.4g %6d %12.4f", step, a.amax, a.scale, a.clipped,
    a.err, b.scale, b.clipped, b.err))
end
check(string.format("both histories clip the first outlier: its scale came from the past (error %.2f)", long[8].err),
  long[8].clipped >= 1 and short[8].clipped >= 1 and long[8].err > 0.5 and short[8].err > 0.5)
check("with 16 steps of history the recurring outliers fit (no clip at 11, 14)", long[11].clipped == 0 and long[14].clipped == 0)
check("with a 1-step history each recurring outlier is clipped again", short[11].clipped == 1 and short[14].clipped == 1)
check(string.format("and its error at step 11 is far larger (%.3f vs %.4f)", short[11].err, long[11].err),
  short[11].err > 10 * long[11].err)

-- 4. FP8 at scale (as in NVIDIA's Transformer Engine and DeepSeek-V3): the matmuls read
-- 1-byte inputs and run at up to twice the bf16 peak, but the optimizer still keeps fp32
-- masters and moments and the weights stay in bf16, so the weight state is the same 16 bytes
-- per parameter (as section 3 measured). There are no FP8 tensor cores here to time, so these
-- rows are the planner's model (its fp8 peak and its byte counts), printed as such and not
-- checked, since a check of the planner against its own inputs could not fail.
lab.print0("\n4. Llama 3 8B, 64 x H100-80GB, 512 sequences of 8192 tokens per step: lab.plan's model,")
lab.print0("   not a measurement (no FP8 tensor cores here; the fp8 row assumes the GPU's fp8 peak):")
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
