-- FP8 training in lab.amp (lua/lab/fp8.lua): a Linear's products really are computed from FP8
-- operands (e4m3 x and W, e5m2 gradients) with the scales delayed scaling says; the amax
-- history and scale react to a planted outlier as Transformer Engine's recipe does; a GPT
-- trained in FP8 follows the f32 run's loss (one rank alone, and data-parallel with the
-- amaxes reduced so every rank casts with the same scale); an FP8 checkpoint resumes bit for
-- bit (scales and histories travel with it); mistakes are named.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r, world = lab.dist.rank(), lab.dist.world_size()

local function same_bits(a, b)
  return a.dtype == b.dtype and lab.max_abs_diff(a:to("f32"), b:to("f32")) == 0
end
local function sgd(ps) return lab.optim.SGD(ps, { lr = 0.1 }) end

T.test("a Linear's forward and backward products are computed from FP8 values", function()
  lab.manual_seed(7)
  local lin = T.place(lab.nn.Linear(8, 6))
  local mp = lab.amp.MixedPrecision(lin, { dtype = "bf16", optimizer = sgd,
    fp8 = lab.amp.DelayedScaling { amax_history_len = 4 } })
  lab.manual_seed(8)
  local x0 = T.place(lab.randn(5, 8)):mul(3)
  local c = T.place(lab.randn(5, 6)):to("bf16")
  local amax = {}
  for step = 1, 2 do
    local x = x0:to("bf16"):requires_grad_(true)
    local w = lin.weight
    -- the scales this step casts with: 1 at first, then fp8_max / (step 1's amax, the only one
    -- in the history), amaxes taken here from the bf16 tensors step 1 cast
    local sx, sw, sg = 1, 1, 1
    if step == 1 then
      amax = { x = x:abs():max():item(), w = w:abs():max():item(), g = c:abs():max():item() }
    else
      sx, sw, sg = 448 / amax.x, 448 / amax.w, 57344 / amax.g
    end
    T.near(lin.fp8_x.scale, sx, 1e-12, "x scale at step " .. step)
    T.near(lin.fp8_w.scale, sw, 1e-12, "weight scale at step " .. step)
    T.near(lin.fp8_g.scale, sg, 1e-12, "gradient scale at step " .. step)
    mp:zero_grad()
    local y = lin(x)
    local loss = (y * c):sum()
    mp:backward(loss)
    -- the same products by hand from the FP8 tensors
    local xq = (x:to("f32") * sx):to("f8e4m3")
    local wq = (w:to("f32") * sw):to("f8e4m3")
    local gq = (c:to("f32") * sg):to("f8e5m2")
    T.eq(xq.dtype, "f8e4m3")
    T.ok(same_bits(xq:to("f32"):to("f8e4m3"), xq), "an FP8 tensor round-trips through f32 unchanged")
    T.ok(lab.max_abs_diff(xq:to("f32"), x:to("f32") * sx) > 0, "the cast really rounds (3 mantissa bits)")
    local want_y = (xq:to("f32"):matmul(wq:to("f32"):t()) * (1 / (sx * sw))):to("bf16") + lin.bias
    T.ok(same_bits(y, want_y), "y = e4m3(x) e4m3(W)^T / (s_x s_w) + b, step " .. step)
    local plain = x:matmul(w:t()) + lin.bias
    T.ok(lab.max_abs_diff(y:to("f32"), plain:to("f32")) > 0, "and it differs from the bf16 product")
    local g32 = gq:to("f32")
    T.ok(same_bits(x.grad, (g32:matmul(wq:to("f32")) * (1 / (sg * sw))):to("bf16")), "dx from e5m2(dy) and e4m3(W)")
    T.ok(same_bits(w.grad, (g32:t():matmul(xq:to("f32")) * (1 / (sg * sx))):to("bf16")), "dW from e5m2(dy) and e4m3(x)")
    T.ok(same_bits(lin.bias.grad, c:sum(1)), "the bias gradient is not quantised")
    mp:step()
  end
end)

T.test("amax history and scale on a planted outlier (margin, history length, most_recent)", function()
  local recipe = lab.amp.DelayedScaling { amax_history_len = 4 }
  local m = recipe:meta("planted", "e4m3")
  local short = lab.amp.DelayedScaling { amax_history_len = 1 }:meta("no history", "e4m3")
  -- amax 1 every step, 100 at steps 5 and 7 (an outlier that recurs)
  local scales, clipped, short_clipped, kept, short_kept = {}, {}, {}, {}, {}
  for step = 1, 12 do
    local v = (step == 5 or step == 7) and 100 or 1
    local t = lab.tensor({ 0.25, -v, 0.5 })
    scales[step] = m.scale
    local before, sbefore = m.clipped, short.clipped
    local q, inv = m:cast(t)
    local sq, sinv = short:cast(t)
    clipped[step], short_clipped[step] = m.clipped - before, short.clipped - sbefore
    kept[step], short_kept[step] = -q:to("f32")[2] * inv, -sq:to("f32")[2] * sinv
    recipe:update() -- this meta's history (one rank: no reduction needed, but it runs the same)
    short:push(short.amax_step)
  end
  T.eq(scales[1], 1, "the first step casts with scale 1")
  for s = 2, 5 do T.eq(scales[s], 448, "amax 1 in the history: scale 448 at step " .. s) end
  T.eq(clipped[5], 1, "the first outlier is clipped: the scale came from the history")
  T.eq(kept[5], 1, "and comes back as 448 / 448 = 1 instead of 100")
  for s = 6, 9 do T.near(scales[s], 4.48, 1e-12, "the outlier keeps the scale at 448/100, step " .. s) end
  T.eq(clipped[7], 0, "so the recurring outlier at step 7 is not clipped")
  T.eq(kept[7], 100, "and survives exactly (100 is an e4m3 value times 4.48)")
  T.eq(scales[12], 448, "three steps after the last outlier left the 4-step window, the scale recovers")
  T.eq(#m:amax_history(), 4)
  T.eq(m:amax_history()[4], 1, "newest last")
  T.eq(short_clipped[7], 1, "with a 1-step history the recurring outlier is clipped again")
  T.eq(short_kept[7], 1)
  -- margin halves the scale per unit; most_recent ignores the history's max
  local mm = lab.amp.DelayedScaling { amax_history_len = 4, margin = 1 }:meta("m", "e5m2")
  mm:push(2)
  T.eq(mm.scale, 57344 / 2 / 2, "scale = fp8_max / amax / 2^margin")
  local mr = lab.amp.DelayedScaling { amax_history_len = 4, amax_compute_algo = "most_recent" }:meta("r", "e4m3")
  mr:push(10)
  mr:push(1)
  T.eq(mr.scale, 448, "most_recent")
  mr:push(0)
  T.eq(mr.scale, 448, "an amax of 0 keeps the scale")
  mr:push(math.huge)
  T.eq(mr.scale, 448, "an infinite amax keeps the scale")
end)

T.test("the amaxes are reduced over the group: every rank casts with the same scale", function()
  local recipe = lab.amp.DelayedScaling { amax_history_len = 2 }
  local a, b = recipe:meta("a", "e4m3"), recipe:meta("unused here", "e5m2")
  a:cast(lab.tensor({ 1 + r }))
  if r == world - 1 then b:cast(lab.tensor({ -8.0 })) end -- only one rank used this one
  recipe:update()
  T.eq(a.scale, 448 / world, "the largest amax of all ranks")
  T.eq(b.scale, 57344 / 8, "a meta one rank used gets that rank's amax on every rank")
  recipe:update() -- nobody used either: histories unchanged
  T.eq(#a:amax_history(), 1)
end)

local cfg = { vocab = 32, d_model = 32, n_layer = 2, n_head = 4, seq_len = 16 }
-- STEPS of AdamW on random token batches; each rank its own rows at world > 1 (DDP)
local STEPS = 24
local function train(fp8)
  lab.manual_seed(1)
  local m = T.place(lab.nn.GPT(cfg))
  local adamw = function(ps) return lab.optim.AdamW(ps, { lr = 3e-3 }) end
  local mp, opt
  if fp8 then mp = lab.amp.MixedPrecision(m, { dtype = "bf16", optimizer = adamw, fp8 = fp8 }) end
  local model = world > 1 and lab.ddp.wrap(m) or m
  if not mp then opt = adamw(model:parameters()) end
  local losses = {}
  for k = 1, STEPS do
    lab.manual_seed(100 + k)
    local ids = T.place(lab.randint(0, cfg.vocab, { 2 * world, 16 })):narrow(1, 2 * r + 1, 2)
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
    lab.dist.all_reduce(l, { op = "avg" })
    losses[k] = l[1]
  end
  return losses, m, mp
end

T.test("a GPT trained in FP8 follows the f32 run's loss", function()
  local ref = train(nil)
  local recipe = lab.amp.DelayedScaling { amax_history_len = 16 }
  local losses, m, mp = train(recipe)
  T.eq(#recipe.metas, 3 * 4 * cfg.n_layer, "qkv, proj, fc, proj of each block: x, W, dy")
  T.eq(m.blocks:at(1).mlp.fc.weight.dtype, "bf16", "weights in bf16, cast to FP8 per product")
  T.ok(ref[STEPS] < ref[1] - 1, "f32 learns: " .. ref[1] .. " -> " .. ref[STEPS])
  if r == 0 then
    print(string.format("%d ranks, step %d: f32 loss %.4f, FP8 loss %.4f (from %.4f)", world, STEPS, ref[STEPS],
      losses[STEPS], ref[1]))
  end
  -- measured at step 24: f32 1.5957 vs FP8 1.6008 (1 rank), 1.3707 vs 1.3738 (2 ranks), 1.2335
  -- vs 1.2380 (4 ranks): within 0.4%; the tolerance is 2% (rounding differs, the curve must not)
  T.near(losses[STEPS], ref[STEPS], 0.02, "FP8 final loss vs f32")
  for k = 1, STEPS, 6 do T.near(losses[k], ref[k], 0.02, "FP8 loss at step " .. k .. " vs f32") end
  T.ok(losses[STEPS] ~= ref[STEPS], "FP8 really changed the arithmetic")
  -- the scales agree across ranks (the amaxes were reduced): min == max over ranks
  local s = lab.tensor({ mp.fp8.metas[1].scale, -mp.fp8.metas[1].scale, mp.fp8.metas[3].scale,
    -mp.fp8.metas[3].scale }, { dtype = "f64" })
  lab.dist.all_reduce(s, { op = "max" })
  T.eq(s[1], -s[2], "x scale equal on every rank")
  T.eq(s[3], -s[4], "gradient scale equal on every rank")
  T.ok(tostring(mp):find("FP8 hybrid", 1, true), tostring(mp))
end)

T.test("an FP8 checkpoint resumes bit for bit: scales and amax histories travel with it", function()
  local common = require("ckpt_common")
  local dir = common.tmpdir("fp8-ckpt")
  local function fresh(len)
    lab.manual_seed(1)
    local m = T.place(lab.nn.GPT(cfg))
    local mp = lab.amp.MixedPrecision(m, { dtype = "bf16", fp8 = lab.amp.DelayedScaling { amax_history_len = len or 4 },
      optimizer = function(ps) return lab.optim.AdamW(ps, { lr = 3e-3 }) end })
    return m, mp
  end
  local function run(m, mp, from, to, out)
    for k = from, to do
      lab.manual_seed(300 + k + 7 * r)
      local ids = T.place(lab.randint(0, cfg.vocab, { 2, 16 }))
      local _, loss = m(ids, ids)
      mp:zero_grad()
      mp:backward(loss)
      mp:step()
      out[k] = loss:item()
    end
  end
  local straight, resumed = {}, {}
  local a, mpa = fresh()
  run(a, mpa, 1, 6, straight) -- 6 steps: the 4-step histories have wrapped around
  local b, mpb = fresh()
  run(b, mpb, 1, 6, {})
  lab.ckpt.save(dir, { model = b, amp = mpb, step = 6 })
  run(a, mpa, 7, 9, straight)
  local c, mpc = fresh()
  T.ok(mpc.fp8.metas[1].scale ~= mpb.fp8.metas[1].scale, "a fresh recipe's scales differ before loading")
  lab.ckpt.load(dir, { model = c, amp = mpc })
  for i, m in ipairs(mpb.fp8.metas) do
    local n = mpc.fp8.metas[i]
    T.eq(n.scale, m.scale, m.name .. " scale")
    T.eq(table.concat(n:amax_history(), ","), table.concat(m:amax_history(), ","), m.name .. " history")
  end
  run(c, mpc, 7, 9, resumed)
  for k = 7, 9 do T.eq(resumed[k], straight[k], "loss of step " .. k) end
  -- a recipe that keeps a shorter history cannot take this state: refused before anything changes
  local d, mpd = fresh(2)
  T.raises(function() lab.ckpt.load(dir, { model = d, amp = mpd }) end, "ckpt.load", "longer amax history",
    "nothing was changed")
  common.remove(dir)
end)

T.test("mistakes are named", function()
  T.raises(function() lab.amp.DelayedScaling { margin = -1 } end, "rank " .. r, "amp.DelayedScaling", "margin")
  T.raises(function() lab.amp.DelayedScaling { amax_history_len = 0 } end, "amax_history_len", "0")
  T.raises(function() lab.amp.DelayedScaling { fp8_format = "e5m2" } end, "fp8_format", "hybrid", "e5m2")
  T.raises(function() lab.amp.DelayedScaling { amax_compute_algo = "mean" } end, "amax_compute_algo", "mean")
  T.raises(function() lab.amp.ScalingMeta("x", "e3m4") end, "amp.ScalingMeta", "e3m4")
  local Vec = lab.nn.class("VecFP8")
  function Vec:init() self:param("w", T.place(lab.ones(3))) end
  T.raises(function() lab.amp.MixedPrecision(Vec(), { dtype = "bf16", optimizer = sgd, fp8 = true }) end,
    "amp.MixedPrecision", "no lab.nn.Linear")
  T.raises(function() lab.amp.MixedPrecision(T.place(lab.nn.Linear(2, 2)), { dtype = "bf16", optimizer = sgd, fp8 = "yes" }) end,
    "fp8 must be true or a lab.amp.DelayedScaling")
  local recipe = lab.amp.DelayedScaling()
  lab.amp.MixedPrecision(T.place(lab.nn.Linear(2, 2)), { dtype = "bf16", optimizer = sgd, fp8 = recipe })
  T.raises(function() lab.amp.MixedPrecision(T.place(lab.nn.Linear(2, 2)), { dtype = "bf16", optimizer = sgd, fp8 = recipe }) end,
    "already serves another model")
end)

T.finish()
