-- lab.sdpa's FlashAttention kernels (impl='flash', kernels/cpu/flash_attention.c on cpu and sim)
-- against math attention computed in f64 from the same inputs: outputs and the three
-- gradients, causal and not, lengths that are not multiples of the 64-row tiles, T != S,
-- Dv != D, bf16 and f16 inputs; PyTorch 1.13 reference values for one case; memory that does
-- not grow with T x S; the default dispatch and the errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "../?.lua;" .. package.path
local T = require("harness")
local E = require("equivalence")
lab.manual_seed(7)

local function maxdiff(a, b) return (a:to("f64") - b:to("f64")):abs():max():item() end

-- out, dq, dk, dv of sdpa(q, k, v) with upstream gradient g, in dtype dt
local function run(q0, k0, v0, g, dt, opts)
  local q = q0:to(dt):detach():requires_grad_()
  local k = k0:to(dt):detach():requires_grad_()
  local v = v0:to(dt):detach():requires_grad_()
  local out = lab.sdpa(q, k, v, opts)
  ;(out:to("f64") * g):sum():backward()
  return out, q.grad, k.grad, v.grad
end

-- flash in dt against math in f64 on the dt-rounded inputs; tol relative to each reference's max
local function compare(label, shape_q, S, Dv, causal, dt, tol)
  local q0 = lab.randn(table.unpack(shape_q))
  local kshape, vshape = { table.unpack(shape_q) }, { table.unpack(shape_q) }
  kshape[#kshape - 1] = S
  vshape[#vshape - 1], vshape[#vshape] = S, Dv
  local k0, v0 = lab.randn(table.unpack(kshape)), lab.randn(table.unpack(vshape))
  local oshape = { table.unpack(shape_q) }
  oshape[#oshape] = Dv
  local g = lab.randn(table.unpack(oshape)):to("f64")
  local r = { run(q0:to(dt), k0:to(dt), v0:to(dt), g, "f64", { causal = causal, impl = "math" }) }
  local f = { run(q0, k0, v0, g, dt, { causal = causal, impl = "flash" }) }
  T.eq(f[1].dtype, dt, label .. " output dtype")
  for i, name in ipairs({ "out", "dq", "dk", "dv" }) do
    local scale = math.max(r[i]:abs():max():item(), 1)
    local d = maxdiff(f[i], r[i])
    T.ok(d <= tol * scale, string.format("%s %s: max |flash - math| %.3g > %.3g", label, name, d, tol * scale))
  end
end

T.test("flash = math (f64) for f32: causal and not, odd lengths, T != S, Dv != D", function()
  local cases = {
    -- q shape, S, Dv
    { { 1, 1, 1, 8 }, 1, 8 },
    { { 2, 3, 5, 4 }, 7, 4 },      -- tiny, T < S
    { { 1, 2, 63, 16 }, 63, 16 },  -- one short tile
    { { 2, 2, 65, 32 }, 65, 32 },  -- a tile and one row
    { { 1, 2, 130, 64 }, 131, 64 }, -- head dim 64, three tiles each way
    { { 1, 1, 200, 24 }, 70, 40 },  -- T > S (causal: the first 130 queries see no key), Dv != D
    { { 3, 37, 12 }, 150, 5 },      -- one batch dim, odd head dims
  }
  for _, causal in ipairs({ false, true }) do
    for _, c in ipairs(cases) do
      local qs, S, Dv = c[1], c[2], c[3]
      local T_, S_ = qs[#qs - 1], S
      if not (causal and T_ > S_) then -- math gives NaN for queries that see no key; checked below
        compare(string.format("f32 %s S=%d Dv=%d causal=%s", table.concat(qs, "x"), S, Dv, tostring(causal)),
                qs, S, Dv, causal, "f32", 2e-5)
      end
    end
  end
end)

T.test("head views of one projection, as the GPT splits and merges heads: flash on the views (no copies, "
  .. "[B, T, H, D] outputs) = math on contiguous copies, every output and gradient, 1 and 2 threads", function()
  local threads = lab.threads()
  -- odd sizes: B 2, T 37 (causal) and 70 (a tile and a part), H 3, D 12; bf16 with f32 sums too
  for _, c in ipairs({ { 37, true, "f32", 2e-5 }, { 70, false, "f32", 2e-5 }, { 37, true, "bf16", 2e-2 } }) do
    local Tn, causal, dt, tol = c[1], c[2], c[3], c[4]
    local B, H, D = 2, 3, 12
    local C = H * D
    lab.manual_seed(5)
    local x0, w0 = lab.randn(B, Tn, C), lab.randn(3 * C, C) * 0.3
    local g = lab.randn(B, Tn, C)
    local function step(impl, nthreads)
      lab.set_threads(nthreads)
      local x, w = x0:to(dt):detach():requires_grad_(), w0:to(dt):detach():requires_grad_()
      local qkv = lab.linear(x, w) -- [B, T, 3C]
      local parts = qkv:split(C, 3)
      local function heads(t)
        local h = t:view(B, Tn, H, D):transpose(2, 3) -- [B, H, T, D], a strided view of qkv
        return impl == "math" and h:contiguous() or h
      end
      local y = lab.sdpa(heads(parts[1]), heads(parts[2]), heads(parts[3]), { causal = causal, impl = impl })
      local merged = y:transpose(2, 3)
      local free = merged:is_contiguous()
      merged = merged:contiguous():view(B, Tn, C)
      ;(merged:to("f64") * g):sum():backward()
      return { merged, x.grad, w.grad }, free
    end
    local want = step("math", 1)
    for _, nt in ipairs({ 1, 2 }) do
      local got, free = step("flash", nt)
      local label = string.format("%s T=%d causal=%s threads=%d", dt, Tn, tostring(causal), nt)
      T.ok(free, label .. ": the output is [B, T, H, D] in memory, so the head merge is free")
      for i, name in ipairs({ "merged output", "dx", "dW" }) do
        local scale = math.max(want[i]:to("f64"):abs():max():item(), 1)
        local d = maxdiff(got[i], want[i])
        T.ok(d <= tol * scale, string.format("%s %s: max |flash - math| %.3g > %.3g", label, name, d, tol * scale))
      end
    end
  end
  lab.set_threads(threads)
  -- a contiguous q keeps a contiguous output (only head views get the [B, T, H, D] one)
  local q = lab.randn(2, 3, 5, 4)
  T.ok(lab.sdpa(q, q, q, { impl = "flash" }):is_contiguous(), "contiguous inputs, contiguous output")
end)

T.test("flash with bf16 and f16 inputs (f32 sums) = math in f64 on the rounded inputs", function()
  -- the result is rounded to bf16 (8 bits) or f16 (11 bits) once, plus the gradients' rounding
  compare("bf16 causal", { 2, 2, 97, 64 }, 97, 64, true, "bf16", 2e-2)
  compare("bf16", { 1, 3, 50, 32 }, 77, 32, false, "bf16", 2e-2)
  compare("f16 causal", { 1, 2, 70, 64 }, 70, 64, true, "f16", 3e-3)
end)

T.test("heads over the kernel's per-thread cache (8 MiB) take the per-tile path", function()
  -- S x (D + Dv) x 4 bytes = 600 x 4096 x 4 > 8 MiB: the keys (forward) and the queries and dO
  -- (backward) are gathered tile by tile instead of once per head; T != S on one side
  compare("f32 causal, heads of 9.8 MB", { 1, 1, 600, 2048 }, 600, 2048, true, "f32", 2e-5)
  compare("bf16, heads of 8.5-9.5 MB", { 1, 1, 520, 2048 }, 580, 2048, false, "bf16", 2e-2)
end)

T.test("causal with T > S: queries that see no key give 0 and no gradient", function()
  local q = lab.randn(1, 1, 6, 4):requires_grad_()
  local k, v = lab.randn(1, 1, 2, 4):requires_grad_(), lab.randn(1, 1, 2, 4):requires_grad_()
  local out = lab.sdpa(q, k, v, { causal = true, impl = "flash" })
  out:sum():backward()
  -- query t sees keys s <= t + (S - T) = t - 4: the first four see none
  T.eq(out:narrow(3, 1, 4):abs():max():item(), 0, "output of the blind queries")
  T.eq(q.grad:narrow(3, 1, 4):abs():max():item(), 0, "their dq")
  -- the fifth sees key 1 only: its output is v[1]
  T.ok(maxdiff(out:narrow(3, 5, 1):squeeze(), v:detach():narrow(3, 1, 1):squeeze()) < 1e-6, "single key")
  local ref = lab.sdpa(q:narrow(3, 5, 2), k, v, { causal = true, impl = "math" })
  T.ok(maxdiff(out:narrow(3, 5, 2), ref) < 1e-6, "the queries that see keys match math")
end)

T.test("PyTorch 1.13 reference values (f64 autograd; /usr/bin/python3, script in the comment)", function()
  -- q[i] = sin(0.1 i + 0.3), k[i] = cos(0.17 i), v[i] = 1.5 sin(0.23 i), g[i] = cos(0.05 i + 1)
  -- over the flat index i of [1, 2, 7, 5]; torch: s = q @ k^T / sqrt(5) masked above the
  -- diagonal with -inf, o = softmax(s) @ v, (o * g).sum().backward()
  local ref_out = {0, 0.341966285, 0.66592216, 0.954805773, 1.19340243, 0.352956238, 0.633482227,
    0.880644474, 1.08142563, 1.22525112, 0.340182425, 0.607865753, 0.843534489, 1.03477662, 1.17151995,
    0.365272268, 0.612500976, 0.827470968, 0.998860372, 1.11764259, 0.372018922, 0.546384319, 0.691973178,
    0.801117741, 0.868069667, 0.0917681143, 0.158849916, 0.217565535, 0.264822585, 0.298132168, -0.13707338,
    -0.175837843, -0.205341418, -0.224030233, -0.230920001, 1.47127475, 1.36592755, 1.18864075, 0.948751567,
    0.658894281, 0.7022302, 0.436693645, 0.148157655, -0.148181386, -0.436716127, -0.762862782, -0.957374149,
    -1.10146329, -1.18754143, -1.21107508, -1.05647799, -0.990868643, -0.873073014, -0.709295065,
    -0.508160524, -0.365195766, -0.279786407, -0.179641478, -0.0700353337, 0.0432593761, 0.36720902,
    0.309546625, 0.235581273, 0.149208512, 0.0549773559, 0.803026892, 0.636505179, 0.436460513, 0.21342869,
    -0.0208438261}
  local ref_dq = {0, 0, 0, 0, 0, -0.0295309619, -0.0401443813, -0.0496004195, -0.0576264544, -0.0639910918,
    -0.00629065954, -0.00728696554, -0.00807318494, -0.00862665064, -0.00893140599, -0.0222953861,
    -0.0155492421, -0.00835480634, -0.000919497566, 0.00654232075, -0.341197922, -0.314546329, -0.278826219,
    -0.235067419, -0.184531515, -0.938161294, -0.863773642, -0.764482994, -0.643151944, -0.503278524,
    -1.1027966, -1.05893784, -0.984549403, -0.881775949, -0.753580483, 0, 0, 0, 0, 0, -0.0537973395,
    -0.1518728, -0.245569697, -0.332186705, -0.409226616, -0.425476745, -0.518297902, -0.59617629,
    -0.656866637, -0.698619213, -0.1600885, -0.200909695, -0.235938569, -0.264165224, -0.284775873,
    0.187879401, 0.0733962513, -0.0432029464, -0.158556583, -0.269338959, 0.0200311805, -0.107066154,
    -0.231076721, -0.348425239, -0.455728494, -0.0604390598, -0.111561065, -0.159466713, -0.202774861,
    -0.240236915}
  local ref_dk = {-0.0625861016, -0.0444110389, -0.0257922358, -0.00691572526, 0.012029885, -0.263891656,
    -0.173980189, -0.0823303698, 0.0101420673, 0.102513168, 0.0470810982, 0.0759652879, 0.104090458,
    0.13117559, 0.156950059, 0.10593977, 0.0372052546, -0.0319010038, -0.100688518, -0.168469986,
    0.116424596, 0.0331815008, -0.050393133, -0.133464255, -0.215201847, 0.0266342887, 0.022795752,
    0.0187294476, 0.0144760049, 0.0100779227, 0.0303980042, 0.0492434328, 0.0675968373, 0.0852748365,
    0.102100798, 1.13357299, 1.07340548, 1.00251286, 0.921603469, 0.831485715, -0.298427524, -0.303342008,
    -0.305225598, -0.304059475, -0.299855291, -0.916637683, -0.819775711, -0.714722812, -0.602528639,
    -0.484314199, -0.116317349, -0.0707331701, -0.0244422484, 0.0220928922, 0.0684072879, 0.224425568,
    0.173210492, 0.120264755, 0.0661173713, 0.0113093649, -0.0242982741, -0.0500518113, -0.0753052472,
    -0.0998062581, -0.123310038, -0.00231772692, -0.00271327502, -0.00308171297, -0.00341935947,
    -0.00372284086}
  local ref_dv = {0.283111733, 0.098461578, -0.0864346794, -0.271114895, -0.455117465, -0.262152768,
    -0.319444968, -0.375938723, -0.431492826, -0.485968422, -0.287786041, -0.307323439, -0.326092688,
    -0.344046875, -0.361141125, -0.306676285, -0.321813131, -0.336145612, -0.349637903, -0.362256282,
    -0.274330382, -0.28775617, -0.300462718, -0.312418265, -0.323592929, -0.19409886, -0.203448132,
    -0.212288889, -0.220599035, -0.228357798, -0.0554156569, -0.057415376, -0.0592715866, -0.060979649,
    -0.0625352941, -1.79401741, -1.78110675, -1.76374425, -1.7419733, -1.71584833, -1.22547519, -1.20468025,
    -1.18087424, -1.15411666, -1.12447438, -1.2568362, -1.23299791, -1.20607777, -1.17614306, -1.1432686,
    -0.939385391, -0.91300263, -0.884337838, -0.853462662, -0.820454274, -0.34974305, -0.334730078,
    -0.318880456, -0.302233798, -0.284831713, -0.120760041, -0.112577882, -0.104114336, -0.0953905594,
    -0.0864283558, -0.0789544181, -0.0709386973, -0.0627456666, -0.0543958045, -0.0459099812}
  local n = 1 * 2 * 7 * 5
  local function filled(f)
    local t = {}
    for i = 0, n - 1 do t[i + 1] = f(i) end
    return lab.tensor(t, { dtype = "f64" }):view(1, 2, 7, 5)
  end
  local q = filled(function(i) return math.sin(0.1 * i + 0.3) end):to("f32")
  local k = filled(function(i) return math.cos(0.17 * i) end):to("f32")
  local v = filled(function(i) return 1.5 * math.sin(0.23 * i) end):to("f32")
  local g = filled(function(i) return math.cos(0.05 * i + 1.0) end)
  local out, dq, dk, dv = run(q, k, v, g, "f32", { causal = true, impl = "flash" })
  T.values(out:view(n), ref_out, 2e-6, "out")
  T.values(dq:view(n), ref_dq, 2e-6, "dq")
  T.values(dk:view(n), ref_dk, 2e-6, "dk")
  T.values(dv:view(n), ref_dv, 2e-6, "dv")
end)

T.test("memory: flash keeps no T x S scores (forward and backward), math does", function()
  local Tn, D = 1024, 16
  local function peak(impl)
    local q = lab.randn(1, 2, Tn, D):requires_grad_()
    local k, v = lab.randn(1, 2, Tn, D):requires_grad_(), lab.randn(1, 2, Tn, D):requires_grad_()
    local before = lab.mem.stats().current
    lab.mem.reset_peak()
    lab.sdpa(q, k, v, { causal = true, impl = impl }):sum():backward()
    return lab.mem.stats().peak - before
  end
  local scores = 2 * Tn * Tn * 4 -- one f32 [1, 2, T, T] tensor
  local pf, pm = peak("flash"), peak("math")
  T.ok(pm >= scores, string.format("math peak %d B holds the scores (%d B)", pm, scores))
  T.ok(pf < scores / 8, string.format("flash peak %d B, an eighth of the scores is %d B", pf, scores // 8))
end)

T.test("a GPT with the kernel (its default) trains as with math attention, every parameter", function()
  local function model(impl)
    lab.manual_seed(3)
    local m = lab.nn.GPT { vocab = 50, d_model = 32, n_layer = 2, n_head = 4, seq_len = 70, attention = impl }
    local ids = lab.randint(0, 50, { 3, 70 })
    local _, loss = m:forward(ids, ids)
    loss:backward()
    return m, loss:item()
  end
  local flash, lf = model(nil)
  local math_, lm = model("math")
  T.near(lf, lm, 1e-5, "loss")
  E.check(T, "GPT flash vs math", E.entries(flash), math_, { rtol = 1e-4, atol = 1e-6 })
end)

T.test("a GPT training step's memory grows linearly with T with the kernel, quadratically with math", function()
  local function peak(Tn, impl)
    lab.manual_seed(1)
    local m = lab.nn.GPT { vocab = 64, d_model = 64, n_layer = 2, n_head = 4, seq_len = Tn, attention = impl }
    local ids = lab.randint(0, 64, { 1, Tn })
    collectgarbage()
    collectgarbage()
    local before = lab.mem.stats().current
    lab.mem.reset_peak()
    local _, loss = m:forward(ids, ids)
    loss:backward()
    return lab.mem.stats().peak - before
  end
  local f1, f2, m1, m2 = peak(512, nil), peak(1024, nil), peak(512, "math"), peak(1024, "math")
  local msg = string.format("peak bytes T=512 -> 1024: kernel %d -> %d, math %d -> %d", f1, f2, m1, m2)
  T.ok(f2 / f1 < 2.3, "kernel grows ~2x: " .. msg)
  T.ok(m2 / m1 > 3, "math grows ~4x in its scores: " .. msg)
end)

T.test("default: flash where supported (f32, bf16, f16), math for f64", function()
  local q = lab.randn(2, 3, 4):requires_grad_()
  T.eq(lab.sdpa(q, q, q).grad_fn, "sdpa_flash")
  T.eq(lab.sdpa(q:to("bf16"), q:to("bf16"), q:to("bf16")).grad_fn, "sdpa_flash")
  T.eq(lab.sdpa(q, q, q, { impl = "math" }).grad_fn, "sdpa")
  local q64 = q:to("f64")
  T.eq(lab.sdpa(q64, q64, q64).grad_fn, "sdpa")
end)

T.test("errors name the op and the values", function()
  local q = lab.randn(2, 3, 4)
  T.raises(function() lab.sdpa(q, q, q, { impl = "fast" }) end, "sdpa: impl must be 'flash' or 'math', got fast")
  local q64 = q:to("f64")
  T.raises(function() lab.sdpa(q64, q64, q64, { impl = "flash" }) end, "impl='flash' has no kernel on")
  T.raises(function() lab.sdpa(q, lab.randn(2, 3, 5), q, { impl = "flash" }) end, "must be [..., T, D]")
end)

T.finish()
