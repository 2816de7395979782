-- lab.plan against published large-scale trainings and against its own promises:
--  * every run of lua/lab/plan_published.lua (76 rows from 12 sources in 7 stacks) is
--    predicted leave-one-stack-out (lua/lab/plan_fit.lua: the free parameters fitted, to the
--    search's tolerance, on the other stacks): each row within 15% of its published figure or
--    listed in loso_misses with its reason, at least 90% within, no source all optimistic by
--    more than 10% but a listed one, every range (the open assumptions' answers, the network
--    among them where the source states none, widened by the planner's error on the other
--    stacks) holding its published figure with no band added, but the listed ones, which
--    README.md lists with their reasons; README.md shows exactly what --plan published prints;
--  * every answer carries a range: the open assumptions named, and the model's error out of
--    sample (plan_presets.model_error, the LOSO 95th percentile, recomputed here); explain
--    prints the terms;
--  * FLOP counts equal the papers' closed forms (Megatron-LM eq. 3, Korthikanti eq. 7-8);
--  * DeepSpeed's TrainSchedule, run step by step with blocking exchanges, takes no longer than
--    the pipeline the planner charges for it (MT-NLG's layout);
--  * interleaved and uneven pipeline stages, recomputation and context parallelism are
--    chosen by the enumeration; MoE imbalance and capacity cost what they should, experts
--    may span the TP group;
--  * absurd questions are refused quickly with the value and the rank named.
package.path = (arg[0]:match("(.*/)") or "./") .. "../?.lua;" .. package.path
local T = require("harness")
local plan = lab.plan
local here = arg[0]:match("(.*/)") or "./"

local published = require("lab.plan_published")
local t0 = os.clock()
local rows, fit = plan.published()
local loso_s = os.clock() - t0

T.test("leave-one-source-out: every row in its band or listed as a miss with its reason", function()
  T.ok(#rows >= 70, "at least 70 published rows, got " .. #rows)
  local sources = {}
  for _, row in ipairs(rows) do sources[row.run.group] = true end
  T.ok(#require("lab.sorted_keys")(sources) >= 12, "at least 12 sources")
  T.ok(#fit.stacks >= 7, "at least 7 stacks (leave-one-out folds), got " .. #fit.stacks)
  T.ok(loso_s < 45, string.format("the LOSO table and the fit on every row are recomputed in %.1f s of CPU", loso_s))
  print(string.format("  (LOSO table and fit on every row: %.1f s of CPU)", loso_s))
  local within = 0
  for _, row in ipairs(rows) do
    local run = row.run
    local key = published.key(run)
    local miss = published.loso_misses[key]
    local ok = row.feasible and math.abs(row.error) <= 0.15
    if ok then within = within + 1 end
    print(string.format("  %-34s %-16s %6d %s published %s, LOSO %s (%s)%s", run.source, run.model, run.gpus,
      run.metric:upper(), plan.show_metric(run.metric, run.published), row.feasible and plan.show_metric(run.metric, row.predicted) or "-",
      row.feasible and string.format("%+.1f%%", 100 * row.error) or "does not fit", miss and "  MISS: " .. miss or ""))
    if miss then
      T.ok(not ok, key .. " is now within 15%: move it out of plan_published.loso_misses")
    else
      T.ok(row.feasible, key .. ": the published layout fits")
      T.ok(ok, string.format("%s: LOSO %s vs published %s (%+.1f%%) leaves the 15%% band", key,
        row.feasible and plan.show_metric(run.metric, row.predicted) or "-", plan.show_metric(run.metric, run.published),
        row.feasible and 100 * row.error or 0))
      if row.feasible then
        T.eq(row.best.tp, run.tp, key .. ": the published TP")
        T.eq(row.best.pp, run.pp, key .. ": the published PP")
      end
    end
  end
  T.ok(within >= 0.9 * #rows, string.format("%d of %d rows within 15%% (at least 90%%)", within, #rows))
end)

T.test("no source whose rows are all optimistic by more than 10% (but the listed one)", function()
  local by = {}
  for _, row in ipairs(rows) do
    local g = by[row.run.group] or { n = 0, optimistic = 0 }
    by[row.run.group] = g
    g.n = g.n + 1
    if row.feasible and row.error > 0.10 then g.optimistic = g.optimistic + 1 end
  end
  for name, g in pairs(by) do
    local all = g.optimistic == g.n
    T.ok(all == (published.optimistic_sources[name] ~= nil),
      string.format("%s: %d of %d rows optimistic by more than 10%%", name, g.optimistic, g.n))
  end
end)

T.test("ranges: each holds its published figure, strictly, but the listed ones", function()
  -- a row's range is its answers under its open assumptions widened by the planner's error on
  -- the other stacks (plan_fit.lua, a 95% quantile): no band is added here. The rows outside
  -- theirs are listed with their reasons in plan_published and README.md (the README test
  -- below compares every line --plan published prints, that list included)
  local spread, inside = 0, 0
  for _, row in ipairs(rows) do
    if row.feasible then
      local key = published.key(row.run)
      T.ok(row.lo <= row.predicted and row.predicted <= row.hi, key .. ": the answer lies in its own range")
      T.ok(type(row.why) == "string" and row.why:find("model error", 1, true), key .. ": the range names what drives it")
      if row.run.weak and row.hi_assumed > row.lo_assumed then spread = spread + 1 end
      local holds = row.lo <= row.run.published and row.run.published <= row.hi
      if holds then inside = inside + 1 end
      local listed = published.range_misses[key] or (published.loso_misses[key] and not holds)
      if listed then
        T.ok(not holds, key .. " now lies in its range: take it out of plan_published.range_misses")
      else
        T.ok(holds, string.format("%s: published %s outside the range %s to %s", key, plan.show_metric(row.run.metric, row.run.published),
          plan.show_metric(row.run.metric, row.lo), plan.show_metric(row.run.metric, row.hi)))
      end
    end
  end
  T.ok(spread >= 10, "weak assumptions spread at least 10 rows' answers, got " .. spread)
  T.ok(inside >= 0.9 * #rows, string.format("%d of %d ranges hold their published figure (at least 90%%)", inside, #rows))
end)

T.test("the fit cannot see the stack it predicts", function()
  -- a fold's parameters come from the other stacks only: refitting a fold changes nothing
  -- (the search is deterministic), and the left-out stack's rows never enter its objective;
  -- the sources of one stack (NeMo 24.07, NeMo long sequence, Megatron-Bridge, Nemotron-4)
  -- are left out together
  local F = require("lab.plan_fit")
  local g = fit.stacks[1]
  local train = {}
  for _, e in ipairs(fit.entries) do if e.run.stack ~= g then train[#train + 1] = e end end
  local x = F.fit(plan, train)
  for i, v in ipairs(x) do T.near(v, fit.fits[g].x[i], 1e-12, "fold " .. g .. ": parameter " .. i) end
  for _, e in ipairs(train) do T.ok(e.run.stack ~= g, "no left-out row trains its own fold") end
  local stack_of = {}
  for _, row in ipairs(rows) do stack_of[row.run.group] = row.run.stack end
  T.eq(stack_of["NeMo 24.07"], stack_of["Megatron-Bridge 25.11"], "NeMo and Megatron-Bridge are one stack")
  T.eq(stack_of["NeMo 24.07"], stack_of["NeMo long sequence"], "and NeMo's long-sequence runs")
end)

T.test("the defaults a plan uses are the fit on every row, a minimum to the search's tolerance", function()
  local F = require("lab.plan_fit")
  local x, err = fit.all, fit.all_error
  for i, f in ipairs(lab.plan_presets.free) do
    T.near(f.default, x[i], 1e-9, string.format("plan_presets.free %s%s", f.name, f.generation and (" " .. f.generation) or ""))
  end
  T.ok(err < 0.08, string.format("mean absolute error on every row %.3f", err))
  -- no single move of the search's last step (0.16% of a parameter's bounds) lowers the
  -- objective: a coordinate-wise minimum at that resolution
  for i, f in ipairs(lab.plan_presets.free) do
    for _, sign in ipairs({ 1, -1 }) do
      local y = {}
      for j, v in ipairs(x) do y[j] = v end
      y[i] = math.min(f.hi, math.max(f.lo, x[i] + sign * F.LAST_STEP * (f.hi - f.lo)))
      T.ok(F.objective(plan, fit.entries, y) >= err - 1e-12, string.format("%s %+d step: no lower", f.name, sign))
    end
  end
  -- the folds' spread, which --plan published prints, covers every fold
  for _, s in ipairs(F.spread(fit)) do
    T.ok(s.lo <= s.hi and s.bounds[1] <= s.lo and s.hi <= s.bounds[2], s.name .. ": its folds within its bounds")
  end
end)

T.test("the model's error band is the LOSO 95th percentile, and every answer carries it", function()
  local F = require("lab.plan_fit")
  local q, n = F.quantile(rows)
  T.eq(n, #rows, "every row feasible counts")
  T.near(lab.plan_presets.model_error, q, 5e-5, string.format("plan_presets.model_error is the LOSO 95th percentile %.4f", q))
  local ask = { model = "llama3-8b", gpus = 8, gpu = "h100", global_batch = 64, seq = 4096, attention_kernel = "fa3" }
  local res, _, m, g, resolved = plan.enumerate(ask)
  local r = plan.range(res[1], m, g, resolved, ask)
  T.near(r.step_hi_s / r.step_s, 1 + q, 1e-3, "the step's range is +-model_error with nothing else open")
  T.near(r.step_lo_s / r.step_s, 1 - q, 1e-3, "either way")
end)

T.test("the network is an open assumption where a source states none", function()
  local F = require("lab.plan_fit")
  local function open(source, model, gpus)
    for _, run in ipairs(published.all) do
      if run.source == source and run.model == model and run.gpus == gpus then
        local keys = {}
        for _, a in ipairs((F.open_assumptions(run))) do keys[a.key] = a.values end
        return keys
      end
    end
  end
  T.ok(open("MosaicML llm-foundry, H100", "mpt-70b", 64).gpu_network, "llm-foundry's H100 table names no network")
  T.ok(not open("MosaicML llm-foundry, A100", "mpt-70b", 64).gpu_network, "its A100 table does (1600 Gbps RoCE)")
  T.ok(open("torchtitan 2024, A100", "llama3-70b", 64).gpu_network, "torchtitan's A100 row names none")
  T.ok(not open("MosaicML llm-foundry, H100", "mpt-7b", 8).gpu_network, "one node: no network")
  T.ok(not open("Llama 3 405B, Table 4", "llama3-405b", 8192).gpu_network, "Llama 3 states RoCE at 400 Gb/s")
end)

-- runs fn with print captured; returns the printed lines
local function printed(fn)
  local lines, saved = {}, print
  print = function(...)
    local parts = {}
    for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
    lines[#lines + 1] = table.concat(parts, "\t")
  end
  local ok, err = pcall(fn)
  print = saved
  if not ok then error(err, 0) end
  return table.concat(lines, "\n")
end

T.test("an answer with a weak assumption carries a range naming it", function()
  local o = { model = "llama3-70b", gpus = 1024, gpu = "h100", global_batch = 1024, seq = 8192, top = 1 }
  local res
  local out = printed(function() res = plan(o) end)
  local b = res[1]
  T.ok(b.step_lo_s < b.step_s and b.step_s < b.step_hi_s, "optimistic < answer < pessimistic")
  T.ok(b.mfu_lo < b.mfu and b.mfu < b.mfu_hi, "the MFU range holds the answer")
  T.ok(out:find("range: step", 1, true) and (out:find("driven most by the attention kernel not given", 1, true)
    or out:find("driven most by the network not given", 1, true)), "printed with the assumption that moves it most")
  T.ok(out:find("model error +-", 1, true) and out:find("LOSO 95th percentile", 1, true), "and the model's own error")
  T.ok(b.step_lo_s < b.step_lo_assumed_s and b.step_hi_assumed_s < b.step_hi_s, "which widens the open assumptions' range")
  -- with the network given, the kernel is what is left open
  o.gpu_network = 50e9
  out = printed(function() res = plan(o) end)
  T.ok(out:find("driven most by the attention kernel not given", 1, true), "the kernel drives it")
  o.gpu_network = nil
  -- naming the kernel and the network leaves the model's error
  o.attention_kernel, o.gpu_network = "fa3", 50e9
  out = printed(function() res = plan(o) end)
  T.eq(res[1].step_lo_assumed_s, res[1].step_s, "no open assumption")
  T.near(res[1].step_hi_s, res[1].step_s * (1 + lab.plan_presets.model_error), 1e-12, "the model's error is left")
  T.ok(out:find("no open assumption", 1, true), "and printed so")
  -- explain shows the terms the roofline does not see
  out = printed(function() plan { model = "mpt-13b", gpus = 64, gpu = "h100", global_batch = 128, seq = 2048, tp = 1, pp = 1,
    micro_batch = 2, zero = 3, recompute = "none", attention_kernel = "triton", explain = true } end)
  for _, want in ipairs({ "attention: triton kernel", "collective latency", "framework overhead", "overlap contention",
    "model error +-" }) do
    T.ok(out:find(want, 1, true), "explain shows " .. want)
  end
end)

T.test("experts whose ranks span the TP group (expert tensor parallel 1)", function()
  local o = { model = "qwen3-235b-a22b", gpu = "h100", gpus = 256, global_batch = 2048, seq = 4096, tp = 2, pp = 8, vpp = 4,
    ep = 32, micro_batch = 1, zero = 1 }
  local res = plan.enumerate(o)
  T.ok(#res > 0 and res[1].etp1, "EP 32 over dp 16 x tp 2 is a layout (Megatron-Bridge's Qwen3-235B run)")
  T.ok(res[1] and plan.layout(res[1]):find("ep32 etp1", 1, true), "and the layout says so")
  -- the same ep over dp (experts split over tp) against over tp x dp (whole experts, each
  -- rank routing its sequence-parallel half of the tokens)
  local m = lab.plan_presets.models["qwen3-235b-a22b"]
  local gpu = lab.plan_presets.gpus.h100
  local q = { seq = 4096, global_batch = 2048 }
  local c = { dp = 16, tp = 2, pp = 8, ep = 16, zero = 1, mb = 1, recompute = "none", v = 4 }
  local split = plan.evaluate(m, gpu, q, c)
  c.etp1 = true
  local whole = plan.evaluate(m, gpu, q, c)
  T.near(whole.bytes_ep, split.bytes_ep / 2, 1e-12, "half the tokens leave each rank")
  local counts = plan.param_counts(m)
  T.near(whole.params_per_gpu - split.params_per_gpu, counts.mlp / 16 / m.layers * whole.layers_held / 2, 1e-9,
    "each rank holds whole experts: the expert parameters per GPU double at tp 2")
end)

T.test("the terms the roofline does not see, one by one", function()
  local time = require("lab.plan_time")
  local m = lab.plan_presets.models["llama2-7b"]
  local gpu = time.with_defaults(lab.plan_presets.gpus.h100)
  local base = { seq = 4096, global_batch = 64, layer_overhead = 0, contention = 0, bus_efficiency = 0.8 }
  local function with(t) local o = {} for k, v in pairs(base) do o[k] = v end for k, v in pairs(t) do o[k] = v end return o end
  -- collective latency: TP 4 pays 2 (t - 1) ring steps per all-reduce, 4 all-reduces per layer
  local c = { tp = 4, mb = 1, recompute = "none" }
  local a = time.layer(m, gpu, with({ latency = 0 }), c)
  local b = time.layer(m, gpu, with({ latency = 1e-3 }), c)
  T.near(b.comm - a.comm, 4 * 2 * 3 * 1e-3, 1e-9, "4 calls x 6 steps x alpha")
  -- TP overlapped with compute (tp_overlap) still slows that compute by the contention
  local hidden = time.layer(m, gpu, with({ tp_overlap = 1 }), c)
  local slowed = time.layer(m, gpu, with({ tp_overlap = 1, contention = 0.5 }), c)
  T.near(hidden.comm, 0, 1e-12, "fully overlapped TP exposes nothing")
  local exposed = time.layer(m, gpu, with({}), c)
  T.near(slowed.fwd - hidden.fwd, 0.5 * 2 * (exposed.comm / 4), 1e-9, "half of the two hidden forward all-reduces comes back")
  -- framework overhead: once per layer per pass (forward, backward, and the recomputed forward)
  local o0, o1 = time.layer(m, gpu, with({}), { tp = 1, mb = 1, recompute = "full" }),
    time.layer(m, gpu, with({ layer_overhead = 1e-4 }), { tp = 1, mb = 1, recompute = "full" })
  T.near((o1.fwd + o1.bwd + o1.rec) - (o0.fwd + o0.bwd + o0.rec), 3e-4, 1e-12, "three passes x overhead")
  -- attention: Triton slower than FlashAttention-2, FlashAttention-3 faster on Hopper only,
  -- short sequences and head dim 64 slower
  local f2 = time.attention_fraction(gpu, { attention_kernel = "fa2" }, 128, 1e9)
  T.near(f2, gpu.attention, 1e-6, "FlashAttention-2 at long sequences is the generation's fraction")
  local th = lab.plan_presets.free_options().triton_hopper
  T.ok(th >= 0.6 and th <= 1.13, "Triton on Hopper: a free parameter within the papers' 0.6 to 1.13")
  T.near(time.attention_fraction(gpu, { attention_kernel = "triton" }, 128, 1e9) / f2, th, 1e-6, "Triton at its fitted factor on Hopper")
  T.near(time.attention_fraction(gpu, { attention_kernel = "triton", triton_hopper = 1.1 }, 128, 1e9) / f2, 1.1, 1e-6, "or the one asked")
  T.near(time.attention_fraction(gpu, { attention_kernel = "fa3" }, 128, 1e9) / f2, 1.6, 1e-6, "FlashAttention-3 1.6x on H100")
  local a100 = time.with_defaults(lab.plan_presets.gpus["a100-80"])
  T.near(time.attention_fraction(a100, { attention_kernel = "fa3" }, 128, 1e9), a100.attention, 1e-6, "no FA3 on Ampere")
  T.near(time.attention_fraction(a100, { attention_kernel = "triton" }, 128, 1e9) / a100.attention, 0.6, 1e-6, "Triton 0.6x on Ampere")
  T.near(time.attention_fraction(gpu, {}, 64, 1e9) / f2, 0.85, 1e-6, "head dim 64: 0.85")
  T.near(time.attention_fraction(gpu, {}, 128, 300) / f2, 0.5, 1e-6, "300 tokens: half (the knee)")
  -- FSDP: a layer's gather hides under the previous layer's compute only when shorter, and
  -- contention charges the overlapped part
  local q = { seq = 2048, global_batch = 128, layer_overhead = 0, contention = 0 }
  local lay = { dp = 64, tp = 1, pp = 1, zero = 3, mb = 2, recompute = "none" }
  local fast = plan.evaluate(m, lab.plan_presets.gpus.h100, q, lay)
  local slow_gpu = {}
  for k, v in pairs(lab.plan_presets.gpus.h100) do slow_gpu[k] = v end
  slow_gpu.network = 1e9
  local slow = plan.evaluate(m, slow_gpu, q, lay)
  T.ok(fast.t_dp_exposed < 0.1 * fast.t_dp, "fast network: the gathers hide")
  T.ok(slow.t_dp_exposed > 0.5 * slow.t_dp, "slow network: most of them do not")
  T.eq(fast.t_contention, 0, "no contention asked, none charged")
  q.contention = 0.2
  local busy = plan.evaluate(m, lab.plan_presets.gpus.h100, q, lay)
  T.near(busy.t_contention, 0.2 * math.min(busy.t_dp - busy.t_dp_exposed, busy.compute_s), 1e-12, "contention x overlapped time")
  T.near(busy.step_s - fast.step_s, busy.t_contention, 1e-9, "and the step grows by it")
  -- gradients reduced in fp32 (Composer's DEFAULT mixed precision): 4 bytes in the reduction,
  -- parameters still gathered in bf16
  T.near(plan.dp_bytes({ reduce_dtype = "fp32" }, { dp = 4, zero = 3, microbatches = 2 }, 1e6), 3 / 4 * (2 + 2 + 4) * 1e6 * 2, 1e-12,
    "ZeRO-3: two bf16 gathers and an fp32 reduce-scatter per micro-batch")
  T.near(plan.dp_bytes({ reduce_dtype = "fp32" }, { dp = 4, zero = 1 }, 1e6), 2 * 3 / 4 * 4 * 1e6, 1e-12, "all-reduce in fp32")
  T.near(plan.dp_bytes({}, { dp = 4, zero = 3, microbatches = 2 }, 1e6), 3 / 4 * 6 * 1e6 * 2, 1e-12, "bf16 by default")
  -- and cast to fp32 first, per layer per micro-batch over the unsharded layer (read 2, write 4
  -- bytes), on the compute stream: the step grows by exactly that
  local qf = { seq = 2048, global_batch = 128, layer_overhead = 0, contention = 0 }
  local bf = plan.evaluate(m, lab.plan_presets.gpus.h100, qf, lay)
  qf.reduce_dtype = "fp32"
  local f32 = plan.evaluate(m, lab.plan_presets.gpus.h100, qf, lay)
  local h100 = time.with_defaults(lab.plan_presets.gpus.h100)
  T.eq(bf.t_grad_prep, 0, "no cast when gradients are reduced in bf16")
  T.near(f32.t_grad_prep, f32.microbatches * f32.params_per_gpu * 6 / (h100.hbm_bw * h100.memory), 1e-12,
    "6 bytes per unsharded element per micro-batch")
  T.near(f32.step_s - bf.step_s - (f32.t_dp_exposed - bf.t_dp_exposed), f32.t_grad_prep, 1e-9, "on the critical path")
  -- PyTorch 1.13's FSDP divides each unsharded gradient in place first (read and write, bf16)
  qf.grad_predivide = true
  local div = plan.evaluate(m, lab.plan_presets.gpus.h100, qf, lay)
  T.near(div.t_grad_prep, f32.t_grad_prep * (6 + 4) / 6, 1e-12, "grad_predivide: 4 bytes more per element")
  -- a blocking pipeline engine: a middle stage holds four transfers per micro-batch (receive
  -- and send, forward and backward), a two-stage pipeline two
  local mt = lab.plan_presets.models["megatron-175b"]
  local a8 = lab.plan_presets.gpus["a100-80"]
  local pq = { seq = 2048, global_batch = 64, layer_overhead = 0, contention = 0, sequence_parallel = false, bus_efficiency = 0.8 }
  local function pipe(pp, blocking)
    pq.pp_blocking = blocking
    return plan.evaluate(mt, a8, pq, { dp = 1, tp = 8, pp = pp, zero = 0, mb = 1, recompute = "full" })
  end
  local one = time.link_time(pq, 2048 * mt.hidden * 2, a8.network, 1, true)
  T.near(pipe(8, true).t_pp_blocking, 4 * one, 1e-12, "pp 8: four transfers per micro-batch")
  T.near(pipe(2, true).t_pp_blocking, 2 * one, 1e-12, "pp 2: two")
  T.near(pipe(8, true).stage_s - pipe(8, false).stage_s, 4 * one, 1e-12, "each on the stage's time")
end)

-- DeepSpeed's TrainSchedule (deepspeed/runtime/pipe/schedule.py) run step by step: 2(m + p - 1)
-- steps; stage s computes forwards on the steps of its parity and backwards on the others. A
-- forward step first receives its activation and sends the previous step's gradient, a
-- backward step sends the previous step's activation and receives its gradient; each exchange
-- is blocking (the instructions' docstrings), a rendezvous that starts when both stages reach
-- it and holds both for `xfer` seconds. F[s], B[s]: a micro-batch's forward and backward
-- (recomputation included) on stage s (1-based). Returns the time the last stage finishes.
local function deepspeed_schedule(m, p, F, B, xfer)
  local prog, pc, t, waiting = {}, {}, {}, {}
  local function valid(i) return i >= 0 and i < m end
  for s = 0, p - 1 do
    local list, prev = {}, -1
    for k = 0, 2 * (m + p - 1) - 1 do
      local fwd, i = k % 2 == s % 2
      if fwd then i = (k - s % 2) // 2 - s // 2
      elseif k % 2 == 0 then i = k // 2 - p + (s + 1) // 2
      else i = (k - 1) // 2 - p + 1 + s // 2 end
      if fwd and s > 0 then
        if valid(i) then list[#list + 1] = "act:" .. (s - 1) .. ":" .. i end
        if valid(prev) then list[#list + 1] = "grad:" .. (s - 1) .. ":" .. prev end
      elseif not fwd and s < p - 1 then
        if valid(prev) then list[#list + 1] = "act:" .. s .. ":" .. prev end
        if valid(i) then list[#list + 1] = "grad:" .. s .. ":" .. i end
      end
      if valid(i) then list[#list + 1] = fwd and F[s + 1] or B[s + 1] end
      prev = i
    end
    prog[s], pc[s], t[s] = list, 1, 0
  end
  local moved = true
  while moved do
    moved = false
    for s = 0, p - 1 do
      while pc[s] <= #prog[s] do
        local ins = prog[s][pc[s]]
        if type(ins) == "number" then t[s] = t[s] + ins
        else
          local w = waiting[ins]
          if w == nil then waiting[ins] = s end
          if w == nil or w == s then break end
          t[s] = math.max(t[s], t[w]) + xfer
          t[w], pc[w], waiting[ins] = t[s], pc[w] + 1, nil
        end
        pc[s], moved = pc[s] + 1, true
      end
    end
  end
  local span = 0
  for s = 0, p - 1 do
    T.ok(pc[s] > #prog[s], "the schedule runs to its end on stage " .. s)
    span = math.max(span, t[s])
  end
  return span
end

T.test("DeepSpeed's TrainSchedule step by step: the planner charges its bubble and blocking transfers in full", function()
  -- equal stages and free transfers: the schedule's 2(m + p - 1) lock steps take exactly the
  -- 1F1B pipeline's (m + p - 1)(F + B)
  local F, B = {}, {}
  for s = 1, 35 do F[s], B[s] = 1, 3 end
  T.near(deepspeed_schedule(240, 35, F, B, 0), (240 + 34) * 4, 1e-9, "no transfers: (m + p - 1)(F + B)")
  -- MT-NLG's layout (section 2.4: TP 8, PP 35, 240 micro-batches of one sequence at DP 8) with
  -- the planner's own stage times and transfer: the pipeline it charges, (m + p - 1) x the
  -- slowest stage with four blocking transfers + the fill's, is no shorter than the schedule
  -- run with them (README.md, "Why MT-NLG stays listed")
  local m = lab.plan_presets.models["mtnlg-530b"]
  local gpu = lab.plan_presets.gpus["a100-80"]
  local o = { seq = 2048, global_batch = 1920, sequence_parallel = false, attention = "materialized", dp_overlap = false,
    pp_blocking = true }
  for k, v in pairs(lab.plan_presets.free_options()) do o[k] = v end
  local r = plan.evaluate(m, gpu, o, { dp = 8, tp = 8, pp = 35, zero = 1, mb = 1, recompute = "full" })
  local time = require("lab.plan_time")
  local lt, head = time.layer(m, gpu, o, r), time.head(m, gpu, o, r)
  for s = 1, 35 do F[s], B[s] = 3 * lt.fwd, 3 * (lt.bwd + lt.rec) end
  F[35], B[35] = F[35] + head / 3, B[35] + 2 * head / 3 -- the LM head: one GEMM forward, two backward
  local xfer = time.link_time(o, 2048 * m.hidden * 2, gpu.network, 1, true)
  local run = deepspeed_schedule(r.microbatches, 35, F, B, xfer)
  local charged = (r.microbatches + 34) * r.stage_s + r.t_pp
  print(string.format("  (MT-NLG at 2240 GPUs: TrainSchedule run step by step %.1f s, the planner's pipeline %.1f s)", run, charged))
  T.ok(run <= charged, "the planner charges no less than the schedule takes")
  T.ok(run >= 0.9 * charged, "and less than 10% more")
  o.pp_blocking = false
  local async = plan.evaluate(m, gpu, o, { dp = 8, tp = 8, pp = 35, zero = 1, mb = 1, recompute = "full" })
  T.ok((async.microbatches + 34) * async.stage_s + async.t_pp < run, "without the blocking transfers it would charge less")
end)

-- README.md's table under `heading` shows each row's published and LOSO figures
local function readme_matches(heading, want)
  local f = assert(io.open(here .. "../../../README.md"))
  local text = f:read("a")
  f:close()
  local section = text:match(heading .. "(.-)\n#")
  T.ok(section, "README.md has the section " .. heading)
  local shown = {}
  for line in (section or ""):gmatch("[^\n]+") do
    local published_s, predicted = line:match("^|.-| %u+ ([^|]-) | ([^|]-) | [^|]- | [^|]- |$")
    if published_s then shown[#shown + 1] = { published_s, predicted } end
  end
  T.eq(#shown, #want, "one README row per published run")
  for i, row in ipairs(want) do
    if shown[i] then
      T.eq(shown[i][1], plan.show_metric(row.run.metric, row.run.published), "row " .. i .. ": the published figure")
      T.eq(shown[i][2], row.feasible and plan.show_metric(row.run.metric, row.predicted) or "does not fit",
        string.format("row %d (%s %s): README says %s (regenerate with llmlab --plan published)", i, row.run.source,
          row.run.model, shown[i][2]))
    end
  end
end

T.test("README.md's published-run table is the planner's leave-one-source-out answer", function()
  readme_matches("### The planner against published runs", rows)
  -- and every line --plan published prints (the summary, the folds' parameters, the rows
  -- outside their range with their reasons) stands in README.md as printed
  local f = assert(io.open(here .. "../../../README.md"))
  local text = f:read("a")
  f:close()
  local F = require("lab.plan_fit")
  local out = printed(function() F.print(plan, rows, "markdown", fit) end)
  for line in out:gmatch("[^\n]+") do
    T.ok(text:find(line, 1, true), "README.md lacks the line (regenerate with llmlab --plan published): " .. line)
  end
end)

T.test("FLOPs: the papers' closed forms", function()
  -- Megatron-LM 2021, equation (3), with full recomputation: 96 B s l h^2 (1 + s/6h + V/16lh)
  local m = lab.plan_presets.models["megatron-1t"]
  local B, s, l, h, V = 3072, 2048, m.layers, m.hidden, m.vocab
  local eq3 = 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
  T.near(plan.hardware_flops(m, B * s, s, "full", "materialized"), eq3, 2e-3, "Megatron-LM eq. (3)")
  -- Korthikanti et al. 2022, equation (7), and appendix A's text for selective
  -- recomputation: "an additional forward pass attention matrix computation (2Bs^2h) and
  -- attention over values (2Bs^2h)" per layer. (Their equation (8), and so their HFU column,
  -- adds 12Bs^2h per layer instead: the planner counts what executes.)
  local eq7 = 72.0 * B * l * s * h * h * (1 + s / (6 * h) + V / (12 * h * l))
  T.near(plan.model_flops(m, B * s, s), eq7, 2e-3, "Korthikanti eq. (7)")
  T.near(plan.hardware_flops(m, B * s, s, "selective", "materialized"), eq7 + 4.0 * B * s * s * h * l, 2e-3, "selective: + 4Bs^2h")
  T.eq(plan.hardware_flops(m, B * s, s, "none", "flash"), plan.model_flops(m, B * s, s), "no recomputation: HFU = MFU")
end)

T.test("activation memory: Korthikanti's Table 2 for GPT-3", function()
  local m = lab.plan_presets.models["megatron-175b"]
  local s, b, h, a, t = 2048, 1, m.hidden, m.heads, 8
  local o = { seq = s, attention = "materialized" }
  local sbh = s * b * h
  T.near(plan.activation_bytes_per_layer(m, o, b, s, 1, "none", false), sbh * (34 + 5 * a * s / h), 1e-12, "no parallelism")
  T.near(plan.activation_bytes_per_layer(m, o, b, s, t, "none", false), sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1e-12, "TP")
  T.near(plan.activation_bytes_per_layer(m, o, b, s, t, "none", true), sbh * (34 / t + 5 * a * s / (h * t)), 1e-12, "TP + SP")
  T.near(plan.activation_bytes_per_layer(m, o, b, s, t, "selective", false), sbh * (10 + 24 / t), 1e-12, "TP + selective")
  T.near(plan.activation_bytes_per_layer(m, o, b, s, t, "selective", true), sbh * 34 / t, 1e-12, "TP + SP + selective")
  T.near(plan.activation_bytes_per_layer(m, o, b, s, t, "full", false), sbh * 2, 1e-12, "full recomputation")
end)

T.test("pipeline stages: interleaved for any v the layers split into, uneven as Llama 3's", function()
  local st = plan.stages(126, 16, 8)
  T.ok(st, "126 layers on 16 ranks x 8 chunks (one layer fewer on the first and last rank)")
  T.eq(st.first, 7); T.eq(st.middle, 8); T.eq(st.last, 7)
  T.ok(plan.stages(126, 16, 3) == nil, "126 layers do not make 48 chunks")
  T.ok(plan.stages(105, 35, 3), "MT-NLG: 105 layers, 35 stages x 3 chunks of one layer")
  local res, rejected = plan.enumerate { model = "llama3-405b", gpu = "h100", gpus = 8192, global_batch = 2048, seq = 8192, tp = 8,
    pp = 16, zero = 2, micro_batch = 1, recompute = "none" }
  local seen = {}
  for _, r in ipairs(res) do seen[r.v] = true; T.ok(r.uneven, "126 layers over 16 ranks are uneven") end
  for _, r in ipairs(rejected) do if r.v and r.mem_total then seen[r.v] = true end end -- evaluated, too big
  for _, v in ipairs({ 1, 2, 4, 8 }) do T.ok(seen[v], "v = " .. v .. " is enumerated") end
  T.eq(res[1].v, 8, "the smallest bubble wins")
end)

T.test("recomputation is chosen: none where it fits, full where only it fits; HFU counts it", function()
  local fits = plan.enumerate { model = "llama3-405b", gpu = "h100", gpus = 8192, global_batch = 2048, seq = 8192, tp = 8, pp = 16, zero = 2 }
  T.eq(fits[1].recompute, "none", "Llama 3 trained 8K sequences without activation checkpointing")
  T.near(fits[1].hfu, fits[1].mfu, 1e-12, "no recomputation: HFU = MFU")
  local res, rejected = plan.enumerate { model = "llama3-8b", gpu = "h100", gpus = 8, global_batch = 8, seq = 32768, tp = 1, pp = 1,
    cp = 1, zero = 3 }
  T.ok(#res > 0, "llama3-8b fits on 8 H100s at 32K tokens")
  for _, r in ipairs(res) do T.eq(r.recompute, "full", "only full recomputation fits") T.ok(r.hfu > r.mfu * 1.2, "HFU counts the recomputed forward") end
  local none_rejected = false
  for _, r in ipairs(rejected) do if r.recompute == "none" and r.why:find("needs") then none_rejected = true end end
  T.ok(none_rejected, "without recomputation it does not fit, and the reason says by how much")
end)

T.test("context parallelism is considered for long sequences without being asked", function()
  local long = plan.enumerate { model = "llama3-405b", gpu = "h100", gpus = 16384, global_batch = 128, seq = 131072, tp = 8, pp = 16,
    zero = 2, micro_batch = 1 }
  T.ok(#long > 0 and (long[1].cp or 1) > 1, "128K tokens: the best layout uses cp > 1")
  local short = plan.enumerate { model = "llama3-8b", gpu = "h100", gpus = 64, global_batch = 64, seq = 4096, tp = 1, pp = 1 }
  for _, r in ipairs(short) do T.eq(r.cp, 1, "4K tokens: no context parallelism") end
end)

T.test("MoE: expert imbalance and capacity", function()
  local base = { model = "mixtral-8x7b", gpu = "h100", gpus = 64, global_batch = 256, seq = 4096, tp = 1, pp = 4, ep = 8, zero = 1,
    micro_batch = 1, recompute = "full" }
  local function best(extra)
    local o = {}
    for k, v in pairs(base) do o[k] = v end
    for k, v in pairs(extra or {}) do o[k] = v end
    local res = plan.enumerate(o)
    return res[1]
  end
  local balanced, skewed = best(), best { expert_imbalance = 1.5 }
  T.ok(skewed.step_s > balanced.step_s * 1.05, "the busiest expert rank sets the pace")
  T.ok(skewed.bytes_ep > balanced.bytes_ep, "and receives more tokens")
  T.near(skewed.model_flops, balanced.model_flops, 1e-12, "the model FLOPs do not change")
  local capped = best { expert_imbalance = 2, capacity_factor = 1.5 }
  T.near(capped.step_s, skewed.step_s, 1e-9, "a capacity factor of 1.5 pads every expert to 1.5x the mean")
  T.raises(function() best { expert_imbalance = 0.5 } end, "rank 0", "expert_imbalance", "0.5")
end)

T.test("absurd questions are refused at once, naming the value and the rank", function()
  local t0 = os.clock()
  T.raises(function() plan { model = "llama3-8b", gpus = 1 << 40, global_batch = 8, seq = 8 } end, "rank 0", "gpus = 1099511627776")
  T.ok(os.clock() - t0 < 1, "refused within a second")
  T.raises(function() plan { model = "llama3-8b", gpus = 0, global_batch = 8, seq = 8 } end, "rank 0", "gpus", "got 0")
  T.raises(function() plan { model = "llama3-8b", gpus = 8.5, global_batch = 8, seq = 8 } end, "gpus", "8.5")
  T.raises(function() plan { model = "llama3-8b", gpus = "many", global_batch = 8, seq = 8 } end, "gpus", "many")
  T.raises(function() plan { model = "llama3-8b", gpus = 8, global_batch = 8, seq = 1 << 40 } end, "seq = 1099511627776")
  T.raises(function() plan { model = "llama3-8b", gpus = 8, seq = 8 } end, "global_batch")
  T.raises(function() plan { model = "nope", gpus = 8, global_batch = 8, seq = 8 } end, "rank 0", "unknown model")
  T.raises(function() plan { model = { layers = 2 }, gpus = 8, global_batch = 8, seq = 8 } end, "hidden")
  local ok8 = { model = "llama3-8b", gpus = 8, global_batch = 8, seq = 8 }
  local function with(k, v) local o = {} for a, b in pairs(ok8) do o[a] = b end o[k] = v return o end
  T.raises(function() plan(with("tp", 0)) end, "rank 0", "tp", "got 0")
  T.raises(function() plan(with("micro_batch", { 1, 0 })) end, "micro_batch", "item 2")
  T.raises(function() plan(with("zero", 5)) end, "zero", "5")
  T.raises(function() plan(with("recompute", "some")) end, "recompute", "some")
  T.raises(function() plan(with("gpu_gemm", 2)) end, "gemm", "2")
  T.raises(function() plan(with("gpu_network", -1)) end, "network", "-1")
  T.raises(function() plan(with("precision", "int4")) end, "precision", "int4")
  T.raises(function() plan(with("top", "all")) end, "top", "all")
  T.raises(function() plan { model = "llama3-8b", gpu = "a100", gpus = 8, global_batch = 8, seq = 8, precision = "fp8" } end, "fp8")
  -- the public helpers check their arguments too
  T.raises(function() plan.stages(126, nil, 8) end, "rank 0", "stages", "argument 2")
  T.raises(function() plan.tp_bytes({ hidden = 8 }, { seq = 8 }, { tp = 2, mb = 1 }, 2) end, "tp_bytes", "microbatches")
  T.raises(function() plan.cp_bytes({ hidden = 8 }, { seq = 8 }, { tp = 1, mb = 1, microbatches = 1 }, 2) end, "cp_bytes", "heads")
  T.raises(function() plan.dp_bytes({}, { dp = 2 }, 0 / 0) end, "dp_bytes", "nan")
  T.raises(function() plan.ep_all_to_all_bytes(8, 4, 2, "two", 2) end, "ep_all_to_all_bytes", "two")
  T.raises(function() plan.param_counts(5) end, "rank 0", "model")
  T.raises(function() plan.layout({}) end, "layout")
  T.raises(function() plan.explain({}, {}, {}, {}) end, "explain")
  T.raises(function() plan.published("pdf") end, "published", "pdf")
  T.raises(function() plan.range({}, {}, {}, {}) end, "rank 0", "range")
  T.raises(function() plan.show_metric("speed", 1) end, "show_metric", "speed")
  T.raises(function() plan(with("attention_kernel", "fa9")) end, "attention_kernel", "fa9")
  T.raises(function() plan(with("gpu_generation", "v100")) end, "generation", "v100")
  T.raises(function() plan(with("contention", 2)) end, "contention", "2")
  T.raises(function() plan(with("pp_blocking", 1)) end, "pp_blocking")
  T.raises(function() plan.cli({ 1 }) end, "cli", "argument 1")
  -- the largest GPU count allowed still answers quickly
  t0 = os.clock()
  local res = plan.enumerate { model = "llama3-405b", gpu = "h100", gpus = 1 << 20, global_batch = 1 << 20, seq = 8192, tp = 8,
    pp = 16, zero = 2, micro_batch = 1 }
  T.ok(#res > 0 and os.clock() - t0 < 10, "2^20 GPUs planned in under 10 s")
end)

T.test("the planner's numbers for one layout are the formulas'", function()
  local m = { layers = 2, hidden = 64, heads = 4, ffn = 256, vocab = 100, gated = false, tied = true }
  local c = plan.param_counts(m)
  T.eq(c.total, 2 * (12 * 64 * 64 + 4 * 64) + 100 * 64 + 2 * 64, "12 h^2 per layer + two norms + embedding + final norm")
  local r = plan.evaluate(m, { bf16 = 1e15, hbm = 1e12, nvlink = 1e11, network = 1e10, per_node = 8 },
    { seq = 128, global_batch = 16 }, { dp = 4, tp = 1, pp = 1, zero = 1, mb = 4, recompute = "none" })
  T.eq(r.mem_params, 2 * c.total, "bf16 parameters")
  T.eq(r.mem_optimizer, 12 * c.total / 4, "ZeRO-1: K = 12 bytes over dp")
  T.near(r.bytes_dp, 2 * 3 / 4 * 2 * c.total, 1e-12, "ring all-reduce of bf16 gradients")
  T.eq(r.bubble, 0)
  local bad = plan.enumerate { model = "llama3-405b", gpu = "a100-40", gpus = 8, global_batch = 8, seq = 4096 }
  T.eq(#bad, 0, "405B does not fit on 8 A100-40GB")
end)

T.test("output formats, and a verdict that agrees with the count", function()
  local o = { model = "llama2-7b", gpus = 16, gpu = "h100", global_batch = 64, seq = 4096, top = 3 }
  local res
  local out = printed(function() res = plan(o) end)
  T.ok(#res > 0)
  T.ok(out:find(#res .. " layouts fit", 1, true), "the count")
  o.format = "csv"
  out = printed(function() plan(o) end)
  T.ok(select(2, out:gsub("\n", "")) == 3, "a header and three rows")
  o.format = "json"
  out = printed(function() plan(o) end)
  T.ok(out:match("^%[{") and out:match("}%]$"), "a JSON array")
  -- a single parallel layout with several variants must not be called "the only layout"
  local one = { model = "llama2-7b", gpus = 8, gpu = "h100", global_batch = 8, seq = 4096, tp = 8, pp = 1, micro_batch = 1, explain = true }
  out = printed(function() res = plan(one) end)
  T.ok(#res > 1, "several variants fit")
  T.ok(not out:find("the only layout that fits", 1, true), "not 'the only layout' when " .. #res .. " fit")
  T.ok(out:find("all " .. #res .. " layouts that fit are", 1, true), "says they are one layout's variants")
  T.ok(out:find("explain dp1 tp8 pp1", 1, true), "explains the winner")
  out = printed(function() plan { model = "llama2-7b", gpus = 8, gpu = "h100", global_batch = 8, seq = 4096, tp = 8, pp = 1,
    micro_batch = 1, zero = 0, recompute = "none" } end)
  T.ok(out:find("1 layout fits", 1, true) and out:find("the only layout that fits", 1, true), "one fits: the only one")
end)

T.finish()
