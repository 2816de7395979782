-- DDP and ZeRO at any world size: N ranks with per-rank batch B train exactly as one rank
-- with batch N*B (5 AdamW steps, f64), with clipping and gradient accumulation too; the
-- measured memory account shrinks by 1/N where each stage says, agrees with
-- lab.mem.estimate, and the traffic in lab.dist.stats() equals the theory.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local E = require("equivalence")
local r, n = lab.dist.rank(), lab.dist.world()
local B, STEPS = 3, 5

local function make(extra_unused)
  lab.manual_seed(5)
  local m = lab.nn.Sequential(lab.nn.Linear(16, 32, { dtype = "f64" }), lab.nn.GELU(),
    lab.nn.Linear(32, 32, { dtype = "f64" }), lab.nn.GELU(), lab.nn.Linear(32, 8, { dtype = "f64" }))
  if extra_unused then m:add("unused", lab.nn.Linear(4, 4, { dtype = "f64" })) end
  return T.place(m)
end

lab.manual_seed(99)
local X, Y = T.place(lab.randn(n * B, 16, { dtype = "f64" })), T.place(lab.randn(n * B, 8, { dtype = "f64" }))
local Xr, Yr = X:slice(1, r * B + 1, (r + 1) * B), Y:slice(1, r * B + 1, (r + 1) * B)
local function loss_fn(model, x, y) return ((model(x) - y) ^ 2):mean() end

-- the single-rank reference: full batch, plain AdamW (optionally clipped, accumulated)
local function reference(opts)
  local m = make()
  local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
  local losses = {}
  for s = 1, STEPS do
    opt:zero_grad()
    local l = loss_fn(m, X, Y)
    l:backward()
    if opts.clip then lab.optim.clip_grad_norm(m:parameters(), opts.clip) end
    opt:step()
    losses[s] = l:item()
  end
  return m, losses
end

-- one step of the distributed model; with accum, two half-batches (the first no_sync'ed
-- for DDP), each loss halved, as gradient accumulation does
local function dist_step(model, step, opts)
  local l
  if opts.accum then
    local h = (B + 1) // 2
    local parts = { { 1, h }, { h + 1, B } }
    l = 0
    for k, part in ipairs(parts) do
      local x, y = Xr:slice(1, part[1], part[2]), Yr:slice(1, part[1], part[2])
      local w = (part[2] - part[1] + 1) / B
      local function run()
        local lk = loss_fn(model, x, y) * w
        lk:backward()
        l = l + lk:item()
      end
      if k == 1 and model.no_sync then model:no_sync(run) else run() end
    end
    l = lab.tensor({ l }, { dtype = "f64" })
  else
    l = loss_fn(model, Xr, Yr)
    l:backward()
  end
  step()
  local avg = l:detach():clone()
  lab.dist.all_reduce(avg, "avg")
  return avg:item()
end

-- the losses of every step, and every parameter's value after the last (entries from the
-- module, or from a ZeRO engine's shards)
local function compare(name, entries, losses, ref, ref_losses)
  for s = 1, STEPS do T.near(losses[s], ref_losses[s], 1e-5, name .. " loss of step " .. s) end
  E.check(T, name, entries, ref, { grads = false, rtol = 1e-5, atol = 1e-10 })
end

for _, opts in ipairs({ {}, { clip = 0.05 }, { accum = true } }) do
  local label = opts.clip and " with clipping" or (opts.accum and " with accumulation" or "")
  local ref, ref_losses = reference(opts)

  T.test("DDP equals one rank with the whole batch" .. label, function()
    local model = lab.ddp.wrap(make(), { bucket_mb = 0.001 })
    local opt = lab.optim.AdamW(model:parameters(), { lr = 1e-2 })
    local losses = {}
    for s = 1, STEPS do
      opt:zero_grad()
      losses[s] = dist_step(model, function()
        if opts.clip then lab.optim.clip_grad_norm(model:parameters(), opts.clip) end
        opt:step()
      end, opts)
    end
    compare("ddp" .. label, E.entries(model.module), losses, ref, ref_losses)
  end)

  for stage = 1, 3 do
    T.test(string.format("ZeRO-%d equals one rank with the whole batch%s", stage, label), function()
      local model = lab.zero.wrap(make(), { stage = stage, lr = 1e-2, bucket_mb = 0.001, clip = opts.clip })
      local losses = {}
      for s = 1, STEPS do
        model:zero_grad()
        losses[s] = dist_step(model, function() model:step() end, opts)
      end
      compare("zero-" .. stage .. label, E.zero_entries(model), losses, ref, ref_losses)
    end)
  end
end

-- tied weights under DDP and every ZeRO stage: test_layouts.lua, over every parameter

T.test("DDP names parameters that got no gradient, unless told to expect them", function()
  local model = lab.ddp.wrap(make(true))
  T.raises(function() loss_fn(model, Xr, Yr):backward() end, "rank " .. r, "no gradient", "unused.weight",
    "find_unused_parameters")
  local ok = lab.ddp.wrap(make(true), { find_unused_parameters = true })
  loss_fn(ok, Xr, Yr):backward()
  T.ok(ok.module.unused.weight.grad ~= nil, "unused parameters get a zero gradient")
end)

-- ---- the memory account ----

-- tensors no longer referenced are freed when Lua collects them: collect before reading
local function tag_bytes(tag)
  collectgarbage()
  return lab.mem.stats(T.place_device).tags[tag].current -- the account of the model's device
end
local PSI = make():num_parameters()
collectgarbage()

-- trains 2 steps and returns {params, grads (after backward), optimizer} in bytes, measured
local function measure(build)
  collectgarbage()
  local base = { param = tag_bytes("param"), grad = tag_bytes("grad"), optimizer = tag_bytes("optimizer") }
  local model, step = build()
  local grads
  for _ = 1, 2 do
    if model.zero_grad then model:zero_grad() end
    loss_fn(model, Xr, Yr):backward()
    grads = tag_bytes("grad") - base.grad
    step()
  end
  local m = { params = tag_bytes("param") - base.param, grads = grads, optimizer = tag_bytes("optimizer") - base.optimizer }
  model = nil
  collectgarbage()
  return m
end

local accounts = {}
T.test("memory: measured per-rank bytes shrink by 1/N where each ZeRO stage says", function()
  accounts[0] = measure(function()
    local m = lab.ddp.wrap(make())
    local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
    return m, function() opt:step(); opt:zero_grad() end
  end)
  for stage = 1, 3 do
    accounts[stage] = measure(function()
      local m = lab.zero.wrap(make(), { stage = stage, lr = 1e-2, bucket_mb = 0.001 })
      return m, function() m:step() end
    end)
  end
  local pad = 8 * n * 8 -- up to n - 1 padding elements in each of a few groups
  local ddp = accounts[0]
  T.ok(math.abs(accounts[1].optimizer * n - ddp.optimizer) <= pad * n,
    string.format("ZeRO-1 optimizer states %d x %d vs DDP %d", accounts[1].optimizer, n, ddp.optimizer))
  T.ok(math.abs(accounts[2].grads * n - ddp.grads) <= pad * n,
    string.format("ZeRO-2 gradients %d x %d vs DDP %d", accounts[2].grads, n, ddp.grads))
  T.ok(math.abs(accounts[3].params * n - ddp.params) <= pad * n,
    string.format("ZeRO-3 parameters %d x %d vs DDP %d", accounts[3].params, n, ddp.params))
end)

T.test("memory: lab.mem.estimate agrees with the measured account within 5%", function()
  for stage = 0, 3 do
    local est = lab.mem.estimate { params = PSI, dtype = "f64", optimizer = "adamw", zero = stage, dp = n }
    local got = accounts[stage]
    for _, k in ipairs({ "params", "grads", "optimizer" }) do
      T.ok(math.abs(got[k] - est[k]) <= 0.05 * est[k],
        string.format("stage %d %s: measured %d, estimated %.0f", stage, k, got[k], est[k]))
    end
  end
  -- the ZeRO paper's example: 7.5B parameters, mixed-precision Adam, 64 GPUs
  local e0 = lab.mem.estimate { params = 7.5e9, mixed_precision = true }
  local e3 = lab.mem.estimate { params = 7.5e9, mixed_precision = true, zero = 3, dp = 64 }
  T.near(e0.total / 1e9, 120, 1e-9, "16 bytes per parameter: 120 GB")
  T.near(e3.total / 1e9, 1.875, 1e-9, "stage 3 on 64 GPUs: 1.875 GB")
end)

T.test("traffic: DDP all-reduces 2(N-1)/N of the gradients per step, ZeRO-3 1.5x that", function()
  local bytes = PSI * 8
  local function one_step(model, step)
    lab.dist.reset_stats()
    loss_fn(model, Xr, Yr):backward()
    step()
    local s = lab.dist.stats().world or {}
    local wire = 0
    for op, v in pairs(s) do
      if op == "all_reduce" or op == "all_gather" or op == "reduce_scatter" then wire = wire + v.wire_bytes end
    end
    return wire, s
  end
  local m = lab.ddp.wrap(make(), { bucket_mb = 0.001 })
  local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
  local ddp_wire, s = one_step(m, function() opt:step() end)
  local theory = 2 * (n - 1) / n * bytes
  T.ok(math.abs(s.all_reduce and s.all_reduce.wire_bytes or 0) - theory <= #m.buckets + 8,
    string.format("DDP ring traffic %d vs theory %.0f", ddp_wire, theory))
  T.ok(math.abs(ddp_wire - theory) <= #m.buckets + 8, string.format("DDP ring traffic %d vs theory %.0f", ddp_wire, theory))
  local z = lab.zero.wrap(make(), { stage = 3, lr = 1e-2 })
  local z_wire = one_step(z, function() z:step() end)
  local pad_bytes = #z.groups * n * 8 * 3
  T.ok(math.abs(z_wire - 1.5 * theory) <= pad_bytes,
    string.format("ZeRO-3 traffic %d vs 1.5 x DDP theory %.0f", z_wire, 1.5 * theory))
end)

T.test("a wrapped model is freed once dropped (its gradient hooks do not pin it)", function()
  local cfg = { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8, tied = false }
  local function param_bytes()
    collectgarbage()
    collectgarbage()
    return lab.mem.stats(T.place_device).tags.param.current
  end
  local before = param_bytes()
  for _, wrap in ipairs({ function(m) return lab.ddp.wrap(m) end,
    function(m) return lab.zero.wrap(m, { stage = 2 }) end, function(m) return lab.zero.wrap(m, { stage = 3 }) end }) do
    do
      local m = wrap(T.place(lab.nn.GPT(cfg)))
      local ids = T.place(lab.randint(0, 16, { 2, 8 }))
      local _, loss = m(ids, ids)
      loss:backward()
    end
    T.eq(param_bytes(), before, "parameter bytes back to where they were")
  end
end)

T.finish()
