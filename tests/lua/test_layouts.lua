-- Every data- and pipeline-parallel layout against its single-rank twin, over EVERY
-- parameter (tests/lua/equivalence.lua): DDP, ZeRO-1/2/3 (tied and untied GPTs), pipeline
-- (GPipe, 1F1B), tensor x pipeline, mixed precision, LoRA; each plain and with gradient
-- accumulation and clipping. The reference trains on the whole batch on one rank;
-- gradients are compared after the last backward, values after the last step. (Tensor and
-- sequence parallelism, and TP x DP, are in test_tp.lua.)
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local E = require("equivalence")
local r, n = lab.dist.rank(), lab.dist.world()
local B, STEPS, CLIP = 2, 2, 0.3

local TIED = { vocab = 16, d_model = 8, n_layer = 1, n_head = 2, seq_len = 4 }
local UNTIED = { vocab = 16, d_model = 8, n_layer = 1, n_head = 2, seq_len = 4, tied = false }
lab.manual_seed(9)
local IDS = lab.randint(0, 16, { B * n, 4 })

-- micro-batch k of `parts` of this rank's rows, or of every rank's (the whole batch, in the
-- same order the ranks' averages combine)
local function batch(k, parts, whole)
  local rows, per = {}, B // parts
  for d = 0, n - 1 do
    if whole or d == r then rows[#rows + 1] = IDS:slice(1, d * B + (k - 1) * per + 1, d * B + k * per) end
  end
  return lab.cat(rows, 1)
end

local function gpt(c)
  lab.manual_seed(3)
  return lab.nn.GPT(c)
end

-- A side of the comparison: model (called as model(ids, ids)), backward(loss), step(clip)
-- -> the norm before clipping (or nil), zero_grad(), grads() and values() -> entries.
local function plain_side(model, params, opt, module)
  module = module or model
  return {
    model = model,
    backward = function(l) l:backward() end,
    zero_grad = function() opt:zero_grad() end,
    step = function(clip)
      local norm = clip and lab.optim.clip_grad_norm(params, clip)
      opt:step()
      return norm
    end,
    grads = function() return E.entries(module) end,
    values = function() return E.entries(module) end,
  }
end

local function sgd(ps) return lab.optim.SGD(ps, { lr = 0.5 }) end

-- trains both sides STEPS steps; with accum each step is two half-batches (loss halved)
local function compare(label, ref_module, ref, par, opts)
  local parts = opts.accum and 2 or 1
  local tol = { rtol = opts.rtol, atol = opts.atol }
  for step = 1, STEPS do
    ref.zero_grad()
    par.zero_grad()
    for k = 1, parts do
      local ids = batch(k, parts, true)
      local _, l = ref.model(ids, ids)
      ref.backward(l / parts)
      local mine = batch(k, parts, false)
      local function run()
        local _, lp = par.model(mine, mine)
        par.backward(lp / parts)
      end
      if k < parts and par.model.no_sync then par.model:no_sync(run) else run() end
    end
    if step == STEPS then
      E.check(T, label .. ": gradients", par.grads(), ref_module,
        { values = false, rtol = tol.rtol, atol = tol.atol })
    end
    local nr = ref.step(opts.clip)
    local np = par.step(opts.clip)
    if opts.clip then
      T.ok(nr > opts.clip, label .. ": clipping is active")
      if np then T.near(np, nr, opts.rtol or 1e-4, label .. ": the global gradient norm") end
    end
  end
  E.check(T, label .. ": values after the steps", par.values(), ref_module,
    { grads = false, rtol = tol.rtol, atol = tol.atol })
end

local VARIANTS = { { label = "" }, { label = " with accumulation and clipping", accum = true, clip = CLIP } }

for _, v in ipairs(VARIANTS) do
  T.test("DDP (tied GPT)" .. v.label, function()
    local ref = gpt(TIED)
    local m = lab.ddp.wrap(gpt(TIED), { bucket_mb = 0.0005 })
    compare("ddp" .. v.label, ref, plain_side(ref, ref:parameters(), sgd(ref:parameters())),
      plain_side(m, m:parameters(), sgd(m:parameters()), m.module), v)
  end)

  -- ZeRO owns AdamW: the reference runs lab.optim.AdamW with the same settings. eps is large
  -- on purpose: Adam divides by |g| + eps, so with a small eps an element whose gradient is
  -- near eps turns f32 reduction-order noise (1e-10) into a visible step (2.9e-6 at eps = 1e-6
  -- on OpenBLAS's Zen kernels at 4 ranks); with eps = 1e-3 the update stays linear in small
  -- gradients, and a gradient that is wrong by a missing reduction still moves values by ~lr/2
  for stage = 1, 3 do
    for _, c in ipairs({ TIED, UNTIED }) do
      local label = string.format("ZeRO-%d (%s GPT)%s", stage, c.tied == false and "untied" or "tied", v.label)
      T.test(label, function()
        local hp = { lr = 1e-2, eps = 1e-3, weight_decay = 0.1 }
        local ref = gpt(c)
        local ropt = lab.optim.AdamW(ref:parameters(), hp)
        local engine = lab.zero.wrap(gpt(c), { stage = stage, lr = hp.lr, eps = hp.eps, weight_decay = hp.weight_decay,
          clip = v.clip, bucket_mb = 0.0005 })
        local par = {
          model = engine,
          backward = function(l) l:backward() end,
          zero_grad = function() engine:zero_grad() end,
          step = function() return engine:step() end,
          grads = function()
            engine:reduce_gradients()
            return E.zero_entries(engine)
          end,
          values = function() return E.zero_entries(engine) end,
        }
        compare(label, ref, plain_side(ref, ref:parameters(), ropt), par, v)
      end)
    end
  end

  -- amp first, then DDP (the documented order): both sides compute in bf16, so the
  -- tolerance is bf16's (8 significant bits); a missing reduction is off by O(1)
  T.test("mixed precision (bf16) under DDP" .. v.label, function()
    local function side(model, wrap)
      local mp = lab.amp.MixedPrecision(model, { dtype = "bf16", optimizer = sgd })
      local called = wrap and lab.ddp.wrap(model) or model
      return {
        model = called,
        backward = function(l) mp:backward(l) end,
        zero_grad = function() mp:zero_grad() end,
        step = function(clip)
          T.ok(mp:step({ clip = clip }), "the step was taken")
          return mp.grad_norm
        end,
        grads = function() return E.entries(model) end,
        values = function() return E.entries(model) end,
      }
    end
    local ref = gpt(TIED)
    compare("amp" .. v.label, ref, side(ref, false), side(gpt(TIED), true),
      { accum = v.accum, clip = v.clip, rtol = 3e-2, atol = 3e-3 })
  end)

  T.test("LoRA under DDP" .. v.label, function()
    local function lora_gpt()
      local m = gpt(TIED)
      return m, lab.lora.apply(m, { r = 2 })
    end
    local ref, rtrain = lora_gpt()
    local inner, train = lora_gpt()
    local m = lab.ddp.wrap(inner)
    -- the adapters' gradients are small (B starts at zero): a clip that bites
    compare("lora" .. v.label, ref, plain_side(ref, rtrain, sgd(rtrain)), plain_side(m, train, sgd(train), inner),
      { accum = v.accum, clip = v.clip and v.clip / 30 })
  end)
end

T.test("ZeRO-3: a tied weight left unmarked is named in the error, with the fix", function()
  local m = gpt(TIED)
  m.wte.weight.shared = nil -- as a model that ties a weight without saying so
  local engine = lab.zero.wrap(m, { stage = 3 })
  T.raises(function() engine(IDS, IDS) end, "sharded parameter", "p.shared = true")
end)

-- a model with parameters of its own that returns two results: ZeRO-3 wraps its forward
-- too, and must hand back both (and gather for the backward of either)
local Scaled = lab.nn.class("Scaled")
function Scaled:init()
  self:add("inner", lab.nn.GPT(UNTIED))
  self:param("scale", lab.ones(1))
end
function Scaled:forward(ids, targets)
  local logits = self.inner(ids) * self.scale
  return logits, lab.cross_entropy(logits, targets)
end

for stage = 1, 3 do
  T.test("ZeRO-" .. stage .. ": a root with its own parameter returning logits and loss", function()
    local function make()
      lab.manual_seed(3)
      return Scaled()
    end
    local ref = make()
    local hp = { lr = 1e-2, eps = 1e-3, weight_decay = 0.1 }
    local engine = lab.zero.wrap(make(), { stage = stage, lr = hp.lr, eps = hp.eps, weight_decay = hp.weight_decay })
    compare("zero-" .. stage .. " scaled", ref, plain_side(ref, ref:parameters(), lab.optim.AdamW(ref:parameters(), hp)), {
      model = engine,
      backward = function(l) l:backward() end,
      zero_grad = function() engine:zero_grad() end,
      step = function() return engine:step() end,
      grads = function()
        engine:reduce_gradients()
        return E.zero_entries(engine)
      end,
      values = function() return E.zero_entries(engine) end,
    }, {})
  end)
end

-- ---- pipeline parallelism: a stack of Linear + GELU layers cut into one stage per rank ----

local W, PB = 8, 8
local function layers()
  lab.manual_seed(21)
  local ls = {}
  for _ = 1, 4 do
    ls[#ls + 1] = lab.nn.Linear(W, W, { dtype = "f64" })
    ls[#ls + 1] = lab.nn.GELU()
  end
  return ls
end
lab.manual_seed(5)
local X, Y = lab.randn(PB, W, { dtype = "f64" }), lab.randn(PB, W, { dtype = "f64" })
local function mse(y, t) return ((y - t) ^ 2):mean() end

for _, schedule in ipairs({ "gpipe", "1f1b" }) do
  for _, v in ipairs(VARIANTS) do
    T.test("pipeline, " .. schedule .. v.label, function()
      local ref = lab.nn.Sequential(layers())
      local ropt = lab.optim.SGD(ref:parameters(), { lr = 0.1 })
      local all = layers()
      local stage = lab.pp.partition(all, n)[r + 1]
      -- this stage's layer k is layer offset + k of the whole stack
      local offset = 0
      for s = 1, r do offset = offset + #all // n + (s <= #all % n and 1 or 0) end
      local function rename(name)
        local k, rest = name:match("^(%d+)%.(.*)$")
        return (tonumber(k) + offset) .. "." .. rest
      end
      local weight = 1
      local pipe = lab.pp.Pipeline(stage, { micro_batches = 2, schedule = schedule,
        loss = function(y, t) return mse(y, t) * weight end, activation_shape = function(mb) return { mb, W } end })
      local opt = lab.optim.SGD(pipe:parameters(), { lr = 0.1 })
      local parts = v.accum and 2 or 1
      for step = 1, STEPS do
        ropt:zero_grad()
        opt:zero_grad()
        for k = 1, parts do -- accumulation: train_step on each part, losses weighted
          local rows = { (k - 1) * PB // parts + 1, k * PB // parts }
          local x, y = X:slice(1, rows[1], rows[2]), Y:slice(1, rows[1], rows[2])
          weight = 1 / parts;
          (mse(ref(x), y) * weight):backward()
          pipe:train_step(x, y)
        end
        if step == STEPS then
          E.check(T, schedule .. v.label .. ": gradients", E.entries(stage, { rename = rename }), ref,
            { values = false, rtol = 1e-10, atol = 1e-12 })
        end
        if v.clip then
          local clip = v.clip / 30 -- this model's gradients are small: a clip that bites
          local nr = lab.optim.clip_grad_norm(ref:parameters(), clip)
          local np = lab.optim.clip_grad_norm(pipe:parameters(), clip, { pipeline_group = lab.dist.world_group() })
          T.near(np, nr, 1e-10, schedule .. ": the norm summed over the stages")
          T.ok(nr > clip, string.format("clipping is active (norm %.3g)", nr))
        end
        ropt:step()
        opt:step()
      end
      E.check(T, schedule .. v.label .. ": values", E.entries(stage, { rename = rename }), ref,
        { grads = false, rtol = 1e-10, atol = 1e-12 })
    end)
  end
end

-- tensor x pipeline parallelism (tp 2 x pp 2 on four ranks), accumulation and clipping:
-- the norm sums over the TP group (replicas once) and then over the stages
T.test("tensor x pipeline parallelism with accumulation and clipping", function()
  local tp = n >= 4 and 2 or 1
  local g = lab.dist.grid { tp = tp, pp = n // tp }
  local c = { vocab = 16, d_model = 8, n_layer = 2, n_head = 2, seq_len = 4, d_ff = 16, tied = false }
  lab.manual_seed(13)
  local twin = lab.nn.GPT(c)
  lab.manual_seed(13)
  local model = lab.tp.GPT(c, { group = g.tp_group })
  local stage = lab.pp.partition(lab.pp.gpt_pieces(model), g.pp)[g.pp_rank + 1]
  local weight = 1
  local pipe = lab.pp.Pipeline(stage, { group = g.pp_group, micro_batches = 2, schedule = "1f1b",
    loss = function(logits, t) return lab.tp.vocab_parallel_cross_entropy(logits, t, g.tp_group) * weight end,
    activation_shape = function(mb) return { mb, 4, 8 } end })
  lab.manual_seed(14)
  local ids, tgt = lab.randint(0, 16, { 8, 4 }), lab.randint(0, 16, { 8, 4 })
  local topt, opt = lab.optim.SGD(twin:parameters(), { lr = 0.5 }), lab.optim.SGD(model:parameters(), { lr = 0.5 })
  local held = {}
  for _, prm in ipairs(stage:parameters()) do held[prm] = true end
  local names = {}
  for _, np in ipairs(model:named_parameters()) do
    names[np[1]] = held[np[2]] and (np[1]:gsub("attn%.qkv_weight$", "attn.qkv.weight"):gsub("attn%.qkv_bias$", "attn.qkv.bias")) or nil
  end
  local function entries() return E.entries(model, { group = g.tp_group, rename = function(nm) return names[nm] end }) end
  for step = 1, STEPS do
    topt:zero_grad()
    opt:zero_grad()
    for k = 1, 2 do
      local x, t = ids:narrow(1, 4 * k - 3, 4), tgt:narrow(1, 4 * k - 3, 4)
      weight = 0.5;
      (select(2, twin(x, t)) * weight):backward()
      pipe:train_step(x:contiguous(), t:contiguous())
    end
    if step == STEPS then E.check(T, "tp x pp: gradients", entries(), twin, { values = false, rtol = 1e-4 }) end
    local clip = 0.3
    local nr = lab.optim.clip_grad_norm(twin:parameters(), clip)
    local np = lab.optim.clip_grad_norm(stage:parameters(), clip, { group = g.tp_group, pipeline_group = g.pp_group })
    T.near(np, nr, 1e-4, "the norm over TP ranks and stages")
    T.ok(nr > clip, "clipping is active")
    topt:step()
    opt:step()
  end
  E.check(T, "tp x pp: values", entries(), twin, { grads = false, rtol = 1e-4 })
end)

T.finish()
