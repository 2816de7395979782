-- Optimizers, schedules and clipping against closed forms.
package.path = (arg[0]:match("(.*/)") or "./") .. "../?.lua;" .. package.path
local T = require("harness")

local function param(values)
  local p = lab.tensor(values, { dtype = "f64" }):requires_grad_()
  return p
end

T.test("SGD, momentum and Nesterov follow torch.optim.SGD", function()
  -- loss = sum(p^2)/2: the gradient is p itself
  local p = param({ 1.0, -2.0 })
  local opt = lab.optim.SGD({ p }, { lr = 0.1 })
  ;(p * p):sum():mul(0.5):backward()
  opt:step()
  T.values(p, { 0.9, -1.8 }, 1e-12)
  local q = param({ 1.0 })
  local m = lab.optim.SGD({ q }, { lr = 0.1, momentum = 0.9 })
  for _ = 1, 2 do
    m:zero_grad();
    (q * q):sum():mul(0.5):backward()
    m:step()
  end
  -- step 1: b = 1, q = 0.9; step 2: b = 0.9 * 1 + 0.9 = 1.8, q = 0.9 - 0.18 = 0.72
  T.near(q[1], 0.72, 1e-12)
  local r = param({ 1.0 })
  local nes = lab.optim.SGD({ r }, { lr = 0.1, momentum = 0.9, nesterov = true })
  ;(r * r):sum():mul(0.5):backward()
  nes:step()
  -- b = 1; g = 1 + 0.9 * 1 = 1.9; r = 1 - 0.19
  T.near(r[1], 0.81, 1e-12)
end)

T.test("optimizers work without an options table (the defaults)", function()
  local p = param({ 1.0, -2.0 })
  local sgd = lab.optim.SGD({ p })
  T.eq(sgd.lr, 0.01)
  T.eq(sgd.nesterov, false)
  p.grad = lab.tensor({ 1.0, 1.0 }, { dtype = "f64" })
  sgd:step()
  T.values(p, { 0.99, -2.01 }, 1e-12)
  local adam = lab.optim.AdamW({ param({ 1.0 }) })
  T.eq(adam.lr, 1e-3)
end)

T.test("AdamW: first step moves each weight by lr (sign of the gradient), decay decoupled", function()
  local p = param({ { 1.0, -1.0 }, { 2.0, 0.5 } })
  local opt = lab.optim.AdamW({ p }, { lr = 0.01, weight_decay = 0.1 })
  ;(p * lab.tensor({ { 3.0, -4.0 }, { 0.5, 2.0 } }, { dtype = "f64" })):sum():backward()
  opt:step()
  -- m/bc1 = g, v/bc2 = g^2: the update is lr * sign(g) (up to eps); decay p *= 1 - lr wd
  local want = { { 1.0 * 0.999 - 0.01, -1.0 * 0.999 + 0.01 }, { 2.0 * 0.999 - 0.01, 0.5 * 0.999 - 0.01 } }
  T.values(p, want, 1e-6)
end)

T.test("warmup then cosine decay", function()
  local o = { lr = 1.0, min_lr = 0.1, warmup = 10, max_steps = 110 }
  T.near(lab.optim.warmup_cosine(0, o), 0.1, 1e-12)
  T.near(lab.optim.warmup_cosine(9, o), 1.0, 1e-12)
  T.near(lab.optim.warmup_cosine(60, o), 0.55, 1e-12)
  T.near(lab.optim.warmup_cosine(110, o), 0.1, 1e-12)
end)

T.test("global-norm clipping", function()
  local a, b = param({ 3.0 }), param({ 4.0 })
  ;(a * a * 0.5 + b * b * 0.5):sum():backward()
  local norm = lab.optim.clip_grad_norm({ a, b }, 1.0)
  T.near(norm, 5, 1e-12)
  T.near(a.grad[1], 0.6, 1e-6)
  T.near(b.grad[1], 0.8, 1e-6)
end)

T.test("AdamW's one multi-tensor step = adamw_step per parameter, bitwise, 1 and 2 threads", function()
  local threads = lab.threads()
  -- sizes around the kernel's 16384-element tasks, 1-D (not decayed) and 2-D, f32; one
  -- parameter without a gradient (left alone); then an f64 one mixed in (the per-tensor path)
  local shapes = { { 37 }, { 16384 }, { 129, 129 }, { 3, 5 }, { 40000 } }
  local function build(dtype_last)
    lab.manual_seed(4)
    local ps = {}
    for i, sh in ipairs(shapes) do
      ps[i] = lab.randn(table.unpack(sh)):to(i == #shapes and dtype_last or "f32"):requires_grad_()
    end
    ps[#ps + 1] = lab.randn(7):requires_grad_() -- no gradient
    for i = 1, #shapes do ps[i].grad = lab.randn(table.unpack(shapes[i])):to(ps[i].dtype) end
    return ps
  end
  for _, last in ipairs({ "f32", "f64" }) do
    local function by_step(nthreads)
      lab.set_threads(nthreads)
      local ps = build(last)
      local opt = lab.optim.AdamW(ps, { lr = 1e-2, weight_decay = 0.1 })
      for _ = 1, 3 do opt:step() end
      return ps
    end
    local function by_tensor()
      lab.set_threads(1)
      local ps = build(last)
      local m, v = {}, {}
      for i, p in ipairs(ps) do m[i], v[i] = lab.zeros_like(p), lab.zeros_like(p) end
      for step = 1, 3 do
        for i, p in ipairs(ps) do
          lab._optim_c.adamw_step(p, m[i], v[i], { lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
            weight_decay = p:dim() >= 2 and 0.1 or 0, step = step })
        end
      end
      return ps
    end
    local want = by_tensor()
    for _, nt in ipairs({ 1, 2 }) do
      local got = by_step(nt)
      for i = 1, #want do
        T.ok((got[i] - want[i]):abs():max():item() == 0, string.format("%s, %d threads: parameter %d", last, nt, i))
      end
    end
    local untouched = build(last)
    T.ok((want[#want] - untouched[#untouched]):abs():max():item() == 0, "a parameter without a gradient is left alone")
  end
  lab.set_threads(threads)
  local p = lab.randn(3):requires_grad_()
  p.grad = lab.randn(3)
  T.raises(function() lab._optim_c.adamw_multi({ p }, { lab.zeros(4) }, { lab.zeros(3) }, {}, { 0 }) end,
    "adamw: parameter, grad and states must be")
  T.raises(function() lab._optim_c.adamw_multi({ p }, {}, {}, {}, {}) end, "adamw: 1 parameters but 0, 0 moments")
end)

T.finish()
