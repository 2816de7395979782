-- Autograd: every differentiable op against finite differences in f64, and the engine's
-- behaviour (accumulation, retain_graph, no_grad, detach, hooks, Function, errors).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
lab.manual_seed(1)

local function leaf(...)
  return lab.randn(...):to("f64"):requires_grad_()
end

local function check(name, fn, inputs, opts)
  T.test("gradcheck " .. name, function()
    local ok, msg = lab.autograd.gradcheck(fn, inputs, opts)
    T.ok(ok, msg)
  end)
end

local a, b = leaf(3, 4), leaf(3, 4)
local row = leaf(4)
local pos = lab.no_grad(function() return (lab.rand(3, 4, { dtype = "f64" }) + 0.5):requires_grad_() end)
check("add with broadcasting", function(x, y) return x + y end, { a, row })
check("sub", function(x, y) return x - y end, { a, b })
check("mul with broadcasting", function(x, y) return x * y end, { a, row })
check("div", function(x, y) return x / y end, { a, pos })
check("pow", function(x, y) return x:pow(y) end, { pos, b })
check("pow by a number", function(x) return x ^ 3 end, { a })
check("maximum/minimum", function(x, y) return x:maximum(y) + x:minimum(y) * 2 end, { a, b })
check("neg abs", function(x) return -x:abs() end, { a })
check("exp log sqrt rsqrt", function(x) return x:exp() + x:log() + x:sqrt() + x:rsqrt() end, { pos })
check("tanh sigmoid", function(x) return x:tanh() + x:sigmoid() end, { a })
check("clamp", function(x) return x:clamp(-0.5, 0.5) end, { a })
check("where", function(x, y) return lab.where(x:gt(0), x, y) end, { a, b })
check("sum mean over dims", function(x) return x:sum(1) + x:mean(1, true):squeeze() + x:sum() end, { a })
check("var std norm", function(x) return x:var(2) + x:std(2) + x:norm(2, 2) + x:norm(1, 2) * 0 + x:norm(3, 2) end, { a })
check("prod", function(x) return x:prod(2) end, { pos })
check("max min values", function(x) return x:max(2) + x:min(1):sum() + x:max() end, { a })
check("softmax log_softmax", function(x) return x:softmax(2) * 3 + x:log_softmax(1) end, { a })
check("matmul 2-D, batched, 1-D", function(x, y) return x:matmul(y:t()):sum(1) end, { a, b })
local bat1, bat2 = leaf(2, 3, 4), leaf(4, 5)
local lin_w, lin_b = leaf(5, 4), leaf(5)
check("linear with bias, [3, 4] and [2, 3, 4] inputs", function(x, y, w, bb)
  return lab.linear(x, w, bb):sum(1) + lab.linear(y, w, bb):sum(1):sum(1)
end, { a, bat1, lin_w, lin_b })
check("linear without bias, 1-D and transposed inputs", function(x, y, w)
  return lab.linear(x, w) + lab.linear(y:t():contiguous():t(), w):sum(1)
end, { row, a, lin_w })
check("batched matmul with broadcast", function(x, y) return x:matmul(y) end, { bat1, bat2 })
local vec = leaf(4)
check("matrix-vector", function(x, y) return x:matmul(y) end, { a, vec })
check("views", function(x)
  return x:view(2, 6):t():reshape(3, 4):transpose(1, 2):permute(2, 1):unsqueeze(1):squeeze(1)
end, { a })
check("narrow select slice expand", function(x)
  return x:narrow(2, 2, 2):sum() + x:select(1, 2):sum() + x:slice(2, 1, 1):expand(3, 5):sum()
end, { a })
check("cat stack split chunk", function(x, y)
  local parts = x:split(2, 2)
  local ch = y:chunk(3, 1)
  return lab.cat({ parts[2], parts[1], ch[3]:expand(3, 4):narrow(2, 1, 2) }, 1):sum(1):sum()
      + lab.stack({ x, y }, 1):sum(1):sum(1):sum() * 2
end, { a, b })
check("contiguous clone", function(x) return x:t():contiguous():clone() end, { a })
check("to f32 and back (f32 rounding: a coarser step)", function(x) return x:to("f32"):to("f64") end, { a }, { eps = 1e-2, atol = 1e-3 })
local W = leaf(6, 4)
local ids = lab.tensor({ { 0, 5, 2 }, { 5, 5, 1 } })
check("embedding (repeated ids accumulate)", function(w) return lab.embedding(ids, w) end, { W })
local lw, lb = leaf(4), leaf(4)
check("layer_norm", function(x, w, bb) return lab.layer_norm(x, w, bb) end, { a, lw, lb })
check("linear with gelu, gelu_tanh and silu", function(x, w, bb)
  return lab.linear(x, w, bb, { activation = "gelu" }) + lab.linear(x, w, bb, { activation = "gelu_tanh" })
    + lab.linear(x, w, bb, { activation = "silu" })
end, { bat1, lin_w, lin_b })
check("layer_norm without affine", function(x) return lab.layer_norm(x) end, { a })
check("rms_norm", function(x, w) return lab.rms_norm(x, w) end, { a, lw })
check("gelu exact and tanh", function(x) return x:gelu() + x:gelu("tanh") end, { a })
check("silu relu", function(x) return x:silu() + x:relu() end, { a })
local logits = leaf(5, 7)
local targets = lab.tensor({ 0, 6, 3, -100, 2 })
check("cross_entropy with ignore_index", function(x) return lab.cross_entropy(x, targets) end, { logits })
check("cross_entropy with label smoothing", function(x) return lab.cross_entropy(x, targets, { label_smoothing = 0.1 }) end, { logits })
local logits3 = leaf(2, 3, 7)
check("cross_entropy over [B, T, C]", function(x) return lab.cross_entropy(x, lab.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })) end, { logits3 })
local q, k, v = leaf(2, 2, 5, 4), leaf(2, 2, 5, 4), leaf(2, 2, 5, 3)
check("sdpa", function(x, y, z) return lab.sdpa(x, y, z) end, { q, k, v })
check("sdpa causal", function(x, y, z) return lab.sdpa(x, y, z, { causal = true }) end, { q, k, v })
check("dropout (same mask each call)", function(x)
  lab.manual_seed(99)
  return lab.dropout(x, 0.3, true)
end, { a })

T.test("sdpa matches the composed ops", function()
  local Q, K, V = lab.randn(1, 2, 6, 4), lab.randn(1, 2, 6, 4), lab.randn(1, 2, 6, 4)
  local scores = Q:matmul(K:transpose(-2, -1)) / 2
  local mask = lab.ones(6, 6):tolist()
  local m = lab.zeros(6, 6)
  for i = 1, 6 do for j = i + 1, 6 do m[i][j] = -1e30 end end
  local ref = (scores + m):softmax(-1):matmul(V)
  T.ok(lab.allclose(lab.sdpa(Q, K, V, { causal = true }), ref, 1e-5, 1e-6), "causal sdpa")
end)

T.test("linear in f32 matches matmul + add, values and every gradient", function()
  local function run(fused)
    lab.manual_seed(7)
    local x = lab.randn(3, 5, 16):requires_grad_()
    local w, bb = lab.randn(24, 16):requires_grad_(), lab.randn(24):requires_grad_()
    local y = fused and lab.linear(x, w, bb) or (x:matmul(w:t()) + bb)
    local gy = lab.randn(3, 5, 24)
    y:backward(gy)
    return { y, x.grad, w.grad, bb.grad }
  end
  local got, want = run(true), run(false)
  for i, what in ipairs({ "y", "dx", "dW", "db" }) do
    T.eq(table.concat(got[i].shape, ","), table.concat(want[i].shape, ","), what .. " shape")
    T.ok(lab.allclose(got[i], want[i], 1e-5, 1e-5), what)
  end
  T.ok(got[3]:is_contiguous(), "dW is written in W's layout")
end)

T.test("linear with an activation (one op, the bias gradient in the activation's backward) = linear then "
  .. "the activation: y and every gradient, odd sizes, 1 and 2 threads", function()
  local threads = lab.threads()
  local acts = { gelu = function(t) return t:gelu() end, gelu_tanh = function(t) return t:gelu("tanh") end,
    silu = function(t) return t:silu() end }
  -- 5 x 15 = 75 rows: two chunks of 32 rows and a partial one; 23 output columns
  for _, kind in ipairs({ "gelu", "gelu_tanh", "silu" }) do
    for _, bias in ipairs({ true, false }) do
      local function run(fused, nthreads)
        lab.set_threads(nthreads)
        lab.manual_seed(9)
        local x = lab.randn(5, 15, 17):requires_grad_()
        local w = lab.randn(23, 17):requires_grad_()
        local bb = bias and lab.randn(23):requires_grad_() or nil
        local y = fused and lab.linear(x, w, bb, { activation = kind }) or acts[kind](x:matmul(w:t()) + (bb or 0))
        y:backward(lab.randn(5, 15, 23))
        return { y, x.grad, w.grad, bb and bb.grad }, y.grad_fn
      end
      local want = run(false, 1)
      for _, nt in ipairs({ 1, 2 }) do
        local got, fn = run(true, nt)
        local label = string.format("%s bias=%s threads=%d", kind, tostring(bias), nt)
        T.eq(fn, "linear_" .. kind, label .. ": one node")
        for i, what in ipairs({ "y", "dx", "dW", "db" }) do
          if want[i] then T.ok(lab.allclose(got[i], want[i], 1e-5, 1e-5), label .. " " .. what) end
        end
      end
      local one, two = run(true, 1), run(true, 2)
      if bias then T.ok((one[4] - two[4]):abs():max():item() == 0, kind .. ": db the same for 1 and 2 threads") end
    end
  end
  lab.set_threads(threads)
  -- half types take the composed path (matmul, add, the activation)
  local xb, wb = lab.ones(2, 4, { dtype = "bf16" }), lab.ones(3, 4, { dtype = "bf16" })
  local yb = lab.linear(xb, wb, lab.ones(3, { dtype = "bf16" }), { activation = "silu" })
  T.ok(math.abs(yb:float():tolist()[1][1] - 5 / (1 + math.exp(-5))) < 0.05, "bf16 silu(5)")
  T.raises(function() lab.linear(xb, wb, nil, { activation = "relu" }) end,
    "linear: activation must be 'gelu', 'gelu_tanh' or 'silu', got 'relu'")
  T.raises(function() lab.linear(xb, wb, nil, "gelu") end, "linear: options (argument 4) must be a table")
  T.raises(function() lab.linear(lab.zeros(2, 5), lab.zeros(3, 4), nil, { activation = "gelu" }) end,
    "linear_gelu: input [2, 5] does not match weight [3, 4]")
end)

T.test("linear: empty inner dim gives the bias; half types take the composed path; errors", function()
  local y = lab.linear(lab.zeros(2, 0), lab.zeros(3, 0), lab.tensor({ 1, 2, 3 }))
  T.values(y, { { 1, 2, 3 }, { 1, 2, 3 } }, 0, "bias rows")
  T.values(lab.linear(lab.zeros(2, 0), lab.zeros(3, 0)), { { 0, 0, 0 }, { 0, 0, 0 } }, 0, "zeros without bias")
  local xb, wb = lab.ones(2, 4, { dtype = "bf16" }), lab.ones(3, 4, { dtype = "bf16" })
  T.values(lab.linear(xb, wb, lab.ones(3, { dtype = "bf16" })):float(), { { 5, 5, 5 }, { 5, 5, 5 } }, 0, "bf16")
  local ok, msg = pcall(lab.linear, lab.zeros(2, 5), lab.zeros(3, 4))
  T.ok(not ok and msg:match("rank %d+: linear: input %[2, 5%] does not match weight %[3, 4%]"), tostring(msg))
  ok, msg = pcall(lab.linear, lab.zeros(2, 4), lab.zeros(3, 4), lab.zeros(4))
  T.ok(not ok and msg:match("rank %d+: linear: bias %[4%] does not match weight %[3, 4%]"), tostring(msg))
  ok, msg = pcall(lab.linear, lab.zeros(2, 4), lab.zeros(4))
  T.ok(not ok and msg:match("linear: weight must be %[out_features, in_features%], got %[4%]"), tostring(msg))
end)

T.test("norm and embedding backward: threaded, the same for any thread count, equal to the composed ops", function()
  local threads = lab.threads()
  local function grads(nthreads)
    lab.set_threads(nthreads)
    lab.manual_seed(3)
    -- 100 rows: three full chunks of rows and a partial one; repeated ids in the embedding
    local x, w, b = lab.randn(4, 25, 40):requires_grad_(), lab.randn(40):requires_grad_(), lab.randn(40):requires_grad_()
    local rw = lab.randn(40):requires_grad_()
    local E = lab.randn(7, 80):requires_grad_()
    local ids = lab.randint(0, 7, { 4, 25 })
    local y = lab.layer_norm(x, w, b) * 1.5 + lab.rms_norm(x, rw)
    local gy = lab.randn(4, 25, 40)
    y:backward(gy)
    lab.embedding(ids, E):backward(lab.randn(4, 25, 80))
    return { x.grad, w.grad, b.grad, rw.grad, E.grad }, { x = x, w = w, b = b, rw = rw, gy = gy }
  end
  local one, inputs = grads(1)
  local two = grads(2)
  lab.set_threads(threads)
  for i, what in ipairs({ "dx", "layer_norm dw", "layer_norm db", "rms_norm dw", "embedding dW" }) do
    T.ok((one[i] - two[i]):abs():max():item() == 0, what .. ": 1 and 2 threads agree bitwise")
  end
  -- the reference: layer_norm and rms_norm written with elementary differentiable ops
  local x = inputs.x:detach():requires_grad_()
  local w, b, rw = inputs.w:detach():requires_grad_(), inputs.b:detach():requires_grad_(), inputs.rw:detach():requires_grad_()
  local mu = x:mean(3, true)
  local var = ((x - mu) * (x - mu)):mean(3, true)
  local ln = (x - mu) / (var + 1e-5):sqrt() * w + b
  local rms = x / ((x * x):mean(3, true) + 1e-6):sqrt() * rw
  local ref_y = ln * 1.5 + rms
  ref_y:backward(inputs.gy)
  for i, ref in ipairs({ x.grad, w.grad, b.grad, rw.grad }) do
    T.ok(lab.allclose(one[i], ref, 1e-4, 1e-4), "against the composed ops, gradient " .. i)
  end
end)

T.test("gradients accumulate into leaves until cleared", function()
  local x = lab.ones(3):requires_grad_();
  (x * 2):sum():backward();
  (x * 3):sum():backward()
  T.values(x.grad, { 5, 5, 5 })
  x.grad = nil
  T.eq(x.grad, nil);
  (x * x):sum():backward()
  T.values(x.grad, { 2, 2, 2 })
end)

T.test("backward with a gradient, retain_graph, and the second-time error", function()
  local x = lab.tensor({ 1.0, 2.0 }):requires_grad_()
  local y = x * x
  y:backward(lab.tensor({ 1.0, 0.5 }), { retain_graph = true })
  T.values(x.grad, { 2, 2 })
  y:backward(lab.tensor({ 1.0, 0.5 }))
  T.values(x.grad, { 4, 4 })
  T.raises(function() y:backward(lab.tensor({ 1.0, 0.5 })) end, "second time", "retain_graph")
  T.raises(function() (x * 1):backward() end, "non-scalar")
  T.raises(function() lab.ones(2):sum():backward() end, "does not require grad")
end)

T.test("no_grad, detach, requires_grad rules", function()
  local x = lab.ones(2):requires_grad_()
  local y = lab.no_grad(function() return x * 2 end)
  T.eq(y.requires_grad, false)
  do
    local guard <close> = lab.no_grad()
    T.eq((x * 2).requires_grad, false)
  end
  T.eq((x * 2).requires_grad, true)
  T.eq(x:detach().requires_grad, false)
  T.eq((x * 2).grad_fn, "mul")
  T.eq(x.is_leaf, true)
  T.eq((x * 2).is_leaf, false)
  T.raises(function() lab.tensor({ 1, 2 }):requires_grad_() end, "floating-point")
  T.raises(function() (x * 2):requires_grad_(false) end, "leaf")
  T.raises(function() x:mul_(2) end, "in-place", "no_grad")
  local d = x:detach()
  d:mul_(3) -- a detached alias shares memory and may change in place
  T.eq(x[1], 3)
end)

T.test("hooks see and may replace gradients", function()
  local x = lab.ones(2):requires_grad_()
  local seen
  local h = x:register_hook(function(g) seen = g:sum():item() return g * 10 end)
  local mid = x * 3
  mid:register_hook(function(g) return g + 1 end)
  mid:sum():backward()
  T.eq(seen, 12, "the leaf hook sees (1 + 1) * 3 per element (the mid hook ran first)")
  T.values(x.grad, { 60, 60 })
  h:remove()
  x.grad = nil;
  (x * 1):sum():backward()
  T.values(x.grad, { 1, 1 })
end)

T.test("autograd.Function calls back into Lua", function()
  local Cube = lab.autograd.Function {
    forward = function(ctx, x)
      ctx:save_for_backward(x)
      return x * x * x
    end,
    backward = function(ctx, g)
      local x = ctx.saved_tensors[1]
      return g * x * x * 3
    end,
  }
  local x = lab.tensor({ 1.0, 2.0 }, { dtype = "f64" }):requires_grad_()
  local y = Cube(x)
  T.eq(y.grad_fn, "Function")
  y:sum():backward()
  T.values(x.grad, { 3, 12 })
  local ok, msg = lab.autograd.gradcheck(function(z) return Cube:apply(z) end, { leaf(3) })
  T.ok(ok, msg)
  local Bad = lab.autograd.Function { forward = function(ctx, z) return z * 1 end, backward = function() error("boom") end }
  T.raises(function() Bad(x):sum():backward() end, "boom")
end)

T.test("graphs are freed: memory stays flat over many steps", function()
  local w = lab.randn(256, 256):requires_grad_()
  local x = lab.randn(64, 256)
  local function step()
    local loss = x:matmul(w):tanh():sum()
    loss:backward()
    w.grad = nil
  end
  step()
  collectgarbage()
  local base = lab.mem.stats().current
  for _ = 1, 50 do step() end
  collectgarbage()
  T.ok(lab.mem.stats().current <= base + 1024, "no growth after 50 steps")
end)

T.test("narrow/select/split gradients: parts added into the producer's gradient equal the padded sum", function()
  lab.manual_seed(11)
  local x = lab.randn(3, 5, 12):requires_grad_()
  local g = { lab.randn(3, 5, 4), lab.randn(3, 5, 4), lab.randn(3, 5, 4) }
  local a, b, c = lab.randn(5, 4), lab.randn(5, 7), lab.randn(3, 12)
  local function expected()
    -- the padded gradients summed by hand, for y = 2 x: split into 3 parts of 4 along dim 3,
    -- two overlapping narrows of dim 3 (of x[1]), a select of dim 2 (index 3), and y:sum()
    local e = lab.zeros(3, 5, 12)
    for i = 1, 3 do e:narrow(3, (i - 1) * 4 + 1, 4):add_(g[i]) end
    e:select(1, 1):narrow(2, 1, 4):add_(a)
    e:select(1, 1):narrow(2, 6, 7):add_(b)
    e:select(2, 3):add_(c)
    return (e + 1) * 2
  end
  local function loss(y)
    local p = y:split(4, 3)
    local l = (p[1] * g[1]):sum() + (p[2] * g[2]):sum() + (p[3] * g[3]):sum()
    local y0 = y:select(1, 1)
    l = l + (y0:narrow(2, 1, 4) * a):sum() + (y0:narrow(2, 6, 7) * b):sum() + (y:select(2, 3) * c):sum()
    return l + y:sum() -- its gradient reaches y as a broadcast view: never written through
  end
  local want = expected()
  for _, order in ipairs({ "sum last", "sum first" }) do
    x.grad = nil
    local y = x * 2
    local l = order == "sum last" and loss(y) or (y:sum() + (loss(y) - y:sum()))
    l:backward()
    T.ok((x.grad - want):abs():max():item() < 1e-5, "x.grad, " .. order)
  end
  -- straight from a leaf: each part is sent to the leaf's gradient
  local w = lab.randn(3, 5, 12):requires_grad_()
  local p = w:split(4, 3);
  ((p[1] * g[1]):sum() + (p[2] * g[2]):sum() + (p[3] * g[3]):sum()):backward()
  local e = lab.zeros(3, 5, 12)
  for i = 1, 3 do e:narrow(3, (i - 1) * 4 + 1, 4):add_(g[i]) end
  T.ok((w.grad - e):abs():max():item() == 0, "leaf split")
end)

T.finish()
