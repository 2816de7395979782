-- lab.cp: ring and all-gather context parallelism against single-rank attention (outputs
-- and the gradients of q, k, v), zigzag positions written out by hand, a CP GPT against its
-- twin in every gradient (through the all-gradients helper), and the all-gather variant's
-- measured bytes against the planner's CP term.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local E = require("equivalence")
local r, n = lab.dist.rank(), lab.dist.world()
local world = lab.dist.world_group()

local function close(a, b, tol, what)
  local scale = math.max(1, b:abs():max():item())
  local d = lab.max_abs_diff(a, b)
  T.ok(d <= tol * scale, string.format("%s: max difference %.3g", what, d))
end

T.test("zigzag positions: rank i holds chunks i and 2N-1-i", function()
  T.eq(table.concat(lab.cp.positions(8, 2, 0), ","), "0,1,6,7")
  T.eq(table.concat(lab.cp.positions(8, 2, 1), ","), "2,3,4,5")
  T.eq(table.concat(lab.cp.positions(8, 4, 1), ","), "1,6")
  T.eq(table.concat(lab.cp.positions(8, 2, 1, false), ","), "4,5,6,7")
  T.raises(function() lab.cp.positions(6, 2, 0) end, "does not split into 4 zigzag chunks")
end)

-- ring attention on the FlashAttention kernel (its default on cpu) and on materialised blocks
for _, attention in ipairs({ "ring", "ring-math", "allgather" }) do
  for _, case in ipairs({ { causal = true, zigzag = true }, { causal = true, zigzag = false }, { causal = false, zigzag = true } }) do
    T.test(string.format("%s attention (causal %s, zigzag %s) equals single-rank attention, values and q/k/v gradients",
      attention, tostring(case.causal), tostring(case.zigzag)), function()
      lab.manual_seed(5)
      local Tn = 4 * n
      local q, k, v = T.place(lab.randn(2, 2, Tn, 4)):requires_grad_(), T.place(lab.randn(2, 2, Tn, 4)):requires_grad_(), T.place(lab.randn(2, 2, Tn, 4)):requires_grad_()
      local w = T.place(lab.randn(2, 2, Tn, 4))
      local full = lab.sdpa(q, k, v, { causal = case.causal, impl = "math" })
      ;(full * w):sum():backward()
      local o = { group = world, zigzag = case.zigzag }
      local function mine(t) return lab.cp.shard(t:detach(), 3, o):contiguous() end
      local ql, kl, vl = mine(q):requires_grad_(), mine(k):requires_grad_(), mine(v):requires_grad_()
      local fn = attention == "allgather" and lab.cp.allgather_attention or lab.cp.ring_attention
      local out = fn(ql, kl, vl, { group = world, zigzag = case.zigzag, causal = case.causal,
        impl = attention == "ring-math" and "math" or nil })
      close(out, mine(full), 1e-5, "output")
      ;(out * mine(w)):sum():backward()
      close(ql.grad, mine(q.grad), 1e-5, "dq")
      close(kl.grad, mine(k.grad), 1e-5, "dk")
      close(vl.grad, mine(v.grad), 1e-5, "dv")
    end)
  end
end

-- the head dims the CUDA kernels take (64, 128) and one they do not (24), in f32 and in bf16
-- (the CUDA kernels' dtype), ring on the FlashAttention blocks against one-rank attention in
-- f64: the sim lane runs these through the device seam
for _, hd in ipairs({ 24, 64, 128 }) do
  for _, dtype in ipairs({ "f32", "bf16" }) do
    T.test(string.format("ring attention, head dim %d, %s: values and q/k/v gradients equal one rank's", hd, dtype), function()
      lab.manual_seed(6)
      local Tn = 4 * n
      local function rnd() return T.place(lab.randn(1, 2, Tn, hd, { dtype = "f64" })) end
      local q, k, v, w = rnd():requires_grad_(), rnd():requires_grad_(), rnd():requires_grad_(), rnd()
      local full = lab.sdpa(q, k, v, { causal = true, impl = "math" })
      ;(full * w):sum():backward()
      local o = { group = world, zigzag = true }
      local function mine(t) return lab.cp.shard(t:detach(), 3, o):contiguous() end
      local ql, kl, vl = mine(q):to(dtype):requires_grad_(), mine(k):to(dtype):requires_grad_(), mine(v):to(dtype):requires_grad_()
      local out = lab.cp.ring_attention(ql, kl, vl, { group = world })
      T.eq(out.dtype, dtype, "the output in q's dtype")
      ;(out * mine(w):to(dtype)):sum():backward()
      local tol = dtype == "f32" and 1e-5 or 4e-2
      close(out:to("f64"), mine(full), tol, "output")
      close(ql.grad:to("f64"), mine(q.grad), tol, "dq")
      close(kl.grad:to("f64"), mine(k.grad), tol, "dk")
      close(vl.grad:to("f64"), mine(v.grad), tol, "dv")
    end)
  end
end

local cfg = { vocab = 16, d_model = 8, n_layer = 2, n_head = 2, seq_len = 8 * n, d_ff = 16 }

for _, attention in ipairs({ "ring", "allgather" }) do
  T.test(string.format("CP=%d GPT (%s, zigzag) equals its single-rank twin in loss and every gradient", n, attention), function()
    lab.manual_seed(9)
    local twin = T.place(lab.nn.GPT(cfg))
    lab.manual_seed(9)
    local model = T.place(lab.cp.GPT(cfg, { group = world, attention = attention }))
    local ids = T.place(lab.randint(0, 16, { 2, 8 * n }))
    local tgt = T.place(lab.randint(0, 16, { 2, 8 * n }))
    local _, lt = twin(ids, tgt)
    lt:backward()
    local _, l = model(ids, tgt)
    l:backward()
    lab.cp.sync_gradients(model, world)
    local avg = lab.tensor({ l:item() }, { dtype = "f64" })
    lab.dist.all_reduce(avg, { op = "avg" })
    T.near(avg[1], lt:item(), 1e-5, "loss")
    E.check(T, "cp " .. attention, E.entries(model), twin, { rtol = 1e-4, atol = 1e-6 })
  end)
end

-- bf16 mixed precision: ring attention merges its blocks by an f32 log-sum-exp; its output
-- must come back in q's dtype, or the backward gets an f32 gradient the bf16 kernels refuse
-- (the old merge promoted it). Three AdamW steps of the CP model against the bf16 twin,
-- every attention and split, losses within bf16's rounding, every parameter after the steps.
local function train_bf16(model, ids, tgt, group)
  local mp = lab.amp.MixedPrecision(model, { dtype = "bf16",
    optimizer = function(ps) return lab.optim.AdamW(ps, { lr = 1e-2 }) end })
  local losses, grads = {}, nil
  for s = 1, 3 do
    mp:zero_grad()
    local _, l = model(ids, tgt)
    mp:backward(l)
    if group then lab.cp.sync_gradients(model, group) end
    mp:step()
    if s == 1 then grads = {} for i, m in ipairs(mp.master_params) do grads[i] = m.grad:clone() end end
    local avg = lab.tensor({ l:float():item() }, { dtype = "f64" })
    if group then lab.dist.all_reduce(avg, { op = "avg", group = group }) end
    losses[s] = avg[1]
  end
  return losses, grads
end

for _, attention in ipairs({ "ring", "allgather" }) do
  for _, zigzag in ipairs({ true, false }) do
    T.test(string.format("CP=%d GPT under bf16 mixed precision (%s, zigzag %s) trains as its bf16 twin", n, attention,
      tostring(zigzag)), function()
      lab.manual_seed(9)
      local twin = T.place(lab.nn.GPT(cfg))
      lab.manual_seed(9)
      local model = T.place(lab.cp.GPT(cfg, { group = world, attention = attention, zigzag = zigzag }))
      local ids = T.place(lab.randint(0, 16, { 2, 8 * n }))
      local tgt = T.place(lab.randint(0, 16, { 2, 8 * n }))
      local lt, gt = train_bf16(twin, ids, tgt)
      local l, g = train_bf16(model, ids, tgt, world)
      for s = 1, 3 do T.near(l[s], lt[s], 2e-2, "loss of step " .. s) end
      T.ok(l[3] < l[1], "the loss falls")
      for i, want in ipairs(gt) do -- the first step's unscaled gradients, every parameter
        local scale = math.max(want:abs():max():item(), 1e-3)
        local d = lab.max_abs_diff(g[i], want)
        T.ok(d <= 5e-2 * scale, string.format("gradient %d of step 1: max difference %.3g (scale %.3g)", i, d, scale))
      end
    end)
  end
end

T.test("all-gather CP: measured bytes equal the planner's CP term", function()
  lab.manual_seed(9)
  local model = T.place(lab.cp.GPT(cfg, { group = world, attention = "allgather" }))
  local ids = T.place(lab.randint(0, 16, { 2, 8 * n }))
  lab.dist.reset_stats()
  local _, l = model(ids, ids)
  l:backward()
  local st = lab.dist.stats().world or {}
  local got = 0
  for _, op in ipairs({ "all_gather", "reduce_scatter" }) do got = got + (st[op] and st[op].wire_bytes or 0) end
  local m = { hidden = 8, heads = 2, kv_heads = 2 }
  local want = lab.plan.cp_bytes(m, { seq = 8 * n, precision = "f32" }, { cp = n, tp = 1, mb = 2, microbatches = 1 }, 2)
  T.eq(got, math.floor(want + 0.5), "wire bytes: K and V all-gathered forward, reduce-scattered backward")
end)

T.finish()
