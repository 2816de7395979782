-- Mixed precision: fp32 masters keep updates a 16-bit weight would round away, the loss
-- scale rescues f16 gradients that would flush to zero, an overflow on one rank skips the
-- step on every rank, a GPT trains as in fp32, and a checkpoint resumes it bit for bit.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local r, world = lab.dist.rank(), lab.dist.world_size()

-- one parameter vector, trained by SGD on loss = sum(w * c)
local Vec = lab.nn.class("Vec")
function Vec:init(n, v) self:param("w", T.place(lab.full({ n }, v, { dtype = "f32" }))) end
function Vec:forward(c) return (self.w * c):sum() end
local function sgd(lr) return function(ps) return lab.optim.SGD(ps, { lr = lr }) end end

T.test("masters keep updates that bf16 rounds away", function()
  local m = T.place(Vec(4, 1.0))
  local mp = lab.amp.MixedPrecision(m, { dtype = "bf16", optimizer = sgd(1e-4) })
  T.eq(m.w.dtype, "bf16", "the model computes in bf16")
  T.eq(mp.master_params[1].dtype, "f32", "the optimizer sees f32")
  for _ = 1, 10 do
    mp:zero_grad()
    mp:backward(m(T.place(lab.ones(4, { dtype = "bf16" }))))
    mp:step()
  end
  T.near(mp.master_params[1][1], 1 - 1e-3, 1e-6, "ten updates of 1e-4 accumulate in the master")
  T.eq(m.w[1], lab.tensor({ 1 - 1e-3 }):to("bf16")[1], "the bf16 weight is the master rounded")
  -- the same updates applied to a bf16 weight directly are lost: 1 - 1e-4 rounds to 1
  local w = T.place(lab.full({ 4 }, 1.0, { dtype = "bf16" }))
  for _ = 1, 10 do w:sub_(T.place(lab.full({ 4 }, 1e-4, { dtype = "bf16" }))) end
  T.eq(w[1], 1.0, "plain bf16 SGD does not move")
end)

-- loss = sum(w * 2^-12) * 2^-14: each weight's gradient is 2^-26, under f16's smallest
-- subnormal (2^-24); the 2^-14 factor is applied in fp32, after the cast
local function tiny_grad(mp, m)
  mp:zero_grad()
  local inner = m(T.place(lab.full({ 4 }, 2.0 ^ -12, { dtype = "f16" })))
  mp:backward(inner:float() * 2.0 ^ -14)
  mp:unscale()
  return mp.master_params[1].grad[1]
end

T.test("the loss scale keeps f16 gradients from flushing to zero", function()
  local m1 = T.place(Vec(4, 1.0))
  local plain = lab.amp.MixedPrecision(m1, { dtype = "f16", loss_scale = 1, optimizer = sgd(1) })
  T.eq(tiny_grad(plain, m1), 0, "unscaled: 2^-26 underflows in f16")
  local m2 = T.place(Vec(4, 1.0))
  local scaled = lab.amp.MixedPrecision(m2, { dtype = "f16", optimizer = sgd(1) })
  T.eq(scaled.scale, 2.0 ^ 16, "dynamic scaling starts at 2^16")
  T.eq(tiny_grad(scaled, m2), 2.0 ^ -26, "scaled by 2^16 in f16, divided out exactly in fp32")
end)

T.test("an overflow on one rank skips the step on every rank and halves the scale", function()
  local m = T.place(Vec(4, 1.0))
  local mp = lab.amp.MixedPrecision(m, { dtype = "f16", optimizer = sgd(0.1), growth_interval = 2 })
  local last = world - 1
  -- step 1: the last rank's gradient is 2^16 * 2 = inf in f16
  mp:zero_grad()
  mp:backward(m(T.place(lab.full({ 4 }, r == last and 2.0 or 2.0 ^ -20, { dtype = "f16" }))))
  T.eq(mp:step(), false, "skipped on rank " .. r)
  T.eq(mp.scale, 2.0 ^ 15, "halved")
  T.eq(m.w[1], 1.0, "weights untouched")
  T.eq(mp.master_params[1][1], 1.0, "master untouched")
  -- two clean steps: the scale grows back
  for k = 1, 2 do
    mp:zero_grad()
    mp:backward(m(T.place(lab.ones(4, { dtype = "f16" }))))
    T.eq(mp:step(), true, "clean step " .. k)
  end
  T.eq(mp.scale, 2.0 ^ 16, "doubled after growth_interval clean steps")
  T.near(mp.master_params[1][1], 0.8, 1e-6, "two SGD steps of 0.1")
  T.eq(mp.skipped, 1)
end)

local cfg = { vocab = 32, d_model = 32, n_layer = 2, n_head = 4, seq_len = 16 }
local function train(dtype, steps, mp_opts)
  lab.manual_seed(1)
  local m = T.place(lab.nn.GPT(cfg))
  local adamw = function(ps) return lab.optim.AdamW(ps, { lr = 3e-3 }) end
  local mp, opt
  if dtype == "f32" then opt = adamw(m:parameters())
  else
    mp_opts = mp_opts or {}
    mp_opts.dtype, mp_opts.optimizer = dtype, adamw
    mp = lab.amp.MixedPrecision(m, mp_opts)
  end
  local losses = {}
  for k = 1, steps do
    lab.manual_seed(100 + k)
    local ids = T.place(lab.randint(0, cfg.vocab, { 4, 16 }))
    local _, loss = m(ids, ids)
    if mp then
      mp:zero_grad()
      mp:backward(loss)
      mp:step()
    else
      opt:zero_grad()
      loss:backward()
      opt:step()
    end
    losses[k] = loss:item()
  end
  return losses, m, mp
end

T.test("a GPT trains in bf16 and f16 as in fp32", function()
  local ref = train("f32", 20)
  for _, dt in ipairs({ "bf16", "f16" }) do
    local losses, m, mp = train(dt, 20)
    T.eq(m.wte.weight.dtype, dt)
    T.ok(losses[20] < losses[1] - 0.5, dt .. " loss falls: " .. losses[1] .. " -> " .. losses[20])
    T.near(losses[20], ref[20], 0.05, dt .. " final loss vs fp32")
    T.eq(mp.skipped, 0, dt .. ": no overflow with an fp32 loss")
    T.ok(m.wte.weight == m.wte.weight, "tied head still tied") -- the same tensor object
  end
end)

T.test("a mixed-precision checkpoint resumes bit for bit (masters, moments, scale)", function()
  local dir = "/tmp/llmlab-amp-test-" .. (os.getenv("OMPI_COMM_WORLD_JOBID") or "") .. tostring(world)
  if r == 0 then os.execute("rm -rf '" .. dir .. "'") end
  lab.dist.barrier()
  local straight = train("f16", 6, { init_scale = 2.0 ^ 10, growth_interval = 2 })
  local function run(m, mp, from, to, out)
    for k = from, to do
      lab.manual_seed(100 + k)
      local ids = T.place(lab.randint(0, cfg.vocab, { 4, 16 }))
      local _, loss = m(ids, ids)
      mp:zero_grad()
      mp:backward(loss)
      mp:step()
      out[k] = loss:item()
    end
  end
  local function fresh()
    lab.manual_seed(1)
    local m = T.place(lab.nn.GPT(cfg))
    return m, lab.amp.MixedPrecision(m, { dtype = "f16", init_scale = 2.0 ^ 10, growth_interval = 2,
      optimizer = function(ps) return lab.optim.AdamW(ps, { lr = 3e-3 }) end })
  end
  local a, amp_a = fresh()
  run(a, amp_a, 1, 3, {})
  lab.ckpt.save(dir, { model = a, amp = amp_a, step = 3 })
  local b, amp_b = fresh()
  T.ok(amp_b.scale ~= amp_a.scale, "a fresh scaler differs before loading")
  T.eq(lab.ckpt.load(dir, { model = b, amp = amp_b }).step, 3)
  T.eq(amp_b.scale, amp_a.scale, "loss scale restored")
  local resumed = {}
  run(b, amp_b, 4, 6, resumed)
  for k = 4, 6 do T.eq(resumed[k], straight[k], "loss of step " .. k) end
  -- a plain checkpoint has no masters: loading it into a mixed-precision run is refused
  lab.ckpt.save(dir, { model = T.place(lab.nn.GPT(cfg)), step = 0 })
  T.raises(function() lab.ckpt.load(dir, { model = b, amp = amp_b }) end, "ckpt.load", "without mixed precision")
  lab.dist.barrier()
  if r == 0 then os.execute("rm -rf '" .. dir .. "'") end
end)

T.test("LoRA then bf16: frozen weights are cast without masters, the adapters train", function()
  lab.manual_seed(3)
  local m = T.place(lab.nn.GPT(cfg))
  local frozen_before = m.blocks:at(1).mlp.fc.weight:to("bf16")
  local trainable = lab.lora.apply(m, { r = 2 })
  local mp = lab.amp.MixedPrecision(m, { dtype = "bf16",
    optimizer = function(ps) return lab.optim.AdamW(ps, { lr = 1e-2 }) end })
  T.eq(#mp.master_params, #trainable, "a master per adapter tensor only")
  local frozen = m.blocks:at(1).mlp.fc.base.weight
  T.eq(frozen.dtype, "bf16")
  T.eq(frozen.requires_grad, false, "still frozen after the cast")
  for k = 1, 3 do
    lab.manual_seed(200 + k)
    local ids = T.place(lab.randint(0, cfg.vocab, { 2, 16 }))
    mp:zero_grad()
    local _, loss = m(ids, ids)
    mp:backward(loss)
    mp:step()
  end
  T.eq(lab.max_abs_diff(frozen, frozen_before), 0, "the frozen weight did not move")
  T.ok(m.blocks:at(1).mlp.fc.lora_B:abs():max():item() > 0, "the adapter did")
  -- the other order would leave the adapters out of the optimizer
  lab.manual_seed(3)
  local late = T.place(lab.nn.GPT(cfg))
  lab.amp.MixedPrecision(late, { dtype = "bf16", optimizer = function(ps) return lab.optim.SGD(ps) end })
  T.raises(function() lab.lora.apply(late, { r = 2 }) end, "LoRALinear", "apply lab.lora first")
end)

T.test("mistakes are named", function()
  T.raises(function() lab.amp.MixedPrecision(T.place(Vec(2, 1)), { dtype = "f32", optimizer = sgd(1) }) end,
    "amp.MixedPrecision", "bf16 or f16", "f32")
  T.raises(function() lab.amp.MixedPrecision(T.place(Vec(2, 1)), { dtype = "bf16" }) end, "optimizer = function")
  local m = T.place(Vec(2, 1))
  lab.amp.MixedPrecision(m, { dtype = "bf16", optimizer = sgd(1) })
  T.raises(function() lab.amp.MixedPrecision(m, { dtype = "f16", optimizer = sgd(1) }) end,
    "parameter w is bf16", "f32 model")
  -- wrapped in DDP first, the wrapper's hooks would stay on tensors that get no gradient
  local wrapped = T.place(Vec(2, 1))
  lab.ddp.wrap(wrapped)
  T.raises(function() lab.amp.MixedPrecision(wrapped, { dtype = "bf16", optimizer = sgd(1) }) end,
    "already reduced by lab.ddp.wrap", "MixedPrecision first")
end)

T.finish()
