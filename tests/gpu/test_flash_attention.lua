-- The CUDA FlashAttention-2 kernels (kernels/cuda/flash_attention*.cu) against math attention
-- computed in f64 on the cpu from the same rounded inputs: outputs and dq, dk, dv, causal and
-- not, lengths that are not multiples of the 64-row tiles, T != S, head dims 64, 96, 128 and
-- 256, bf16 and f16. Sizes are small so compute-sanitizer runs it in seconds. With
-- LLMLAB_GPU_TEST_DEVICE=sim the same checks run the cpu kernel through the sim device.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local G = require("gpu_common")
G.require_gpu()
local T = require("harness")
lab.manual_seed(11)

-- out, dq, dk, dv of sdpa on device dev in dtype dt, upstream gradient g (f64 cpu)
local function run(q0, k0, v0, g, dev, dt, opts)
  local q = q0:to({ device = dev, dtype = dt }):detach():requires_grad_()
  local k = k0:to({ device = dev, dtype = dt }):detach():requires_grad_()
  local v = v0:to({ device = dev, dtype = dt }):detach():requires_grad_()
  local out = lab.sdpa(q, k, v, opts)
  ;(out:to("f64") * g:to(dev)):sum():backward()
  return out, q.grad, k.grad, v.grad
end

local function case(B, H, Tq, S, D, causal, dt, tol)
  local label = string.format("%s B=%d H=%d T=%d S=%d D=%d causal=%s", dt, B, H, Tq, S, D, tostring(causal))
  local q0, k0, v0 = lab.randn(B, H, Tq, D):to(dt), lab.randn(B, H, S, D):to(dt), lab.randn(B, H, S, D):to(dt)
  local g = lab.randn(B, H, Tq, D):to("f64")
  local ref = { run(q0, k0, v0, g, "cpu", "f64", { causal = causal, impl = "math" }) }
  local got = { run(q0, k0, v0, g, G.dev, dt, { causal = causal, impl = "flash" }) }
  T.eq(got[1].device:sub(1, #G.dev), G.dev, label .. " ran on the device")
  T.eq(got[1].dtype, dt, label .. " dtype")
  for i, name in ipairs({ "out", "dq", "dk", "dv" }) do
    local r = ref[i]
    local d = (got[i]:cpu():to("f64") - r):abs():max():item()
    local scale = math.max(r:abs():max():item(), 1)
    T.ok(d <= tol * scale, string.format("%s %s: max |flash - math| %.3g > %.3g", label, name, d, tol * scale))
  end
  return got, { q0, k0, v0, g }
end

for _, dt in ipairs({ "bf16", "f16" }) do
  local tol = dt == "bf16" and 3e-2 or 4e-3
  T.test("flash = math (f64) in " .. dt .. ", head dims 64, 96, 128 and 256", function()
    for _, causal in ipairs({ false, true }) do
      case(1, 2, 1, 1, 64, causal, dt, tol)        -- one query, one key
      case(2, 3, 37, 37, 64, causal, dt, tol)      -- shorter than a tile
      case(1, 2, 100, 100, 128, causal, dt, tol)   -- a tile and a tail
      case(1, 1, 130, 257, 64, causal, dt, tol)    -- T < S: causal aligned at the bottom right
      case(2, 1, 64, 64, 128, causal, dt, tol)     -- exactly one tile
      case(1, 2, 45, 70, 96, causal, dt, tol)      -- D = 96: 12 chunks a row
      case(1, 1, 33, 100, 256, causal, dt, tol)    -- D = 256: 32-key tiles, two backward passes
    end
    case(1, 1, 90, 40, 64, false, dt, tol)         -- T > S without the mask
  end)
end

-- lab.use_deterministic_algorithms(true): the backward sums dq in a fixed order (kernels/cuda:
-- flash_bwd_dq_k, one block per query tile, instead of f32 atomics from every key tile), so two
-- runs give the same bits; still equal to math. Every head dim and dtype (each its own kernels).
T.test("deterministic dq: two runs bitwise the same, equal to math", function()
  T.eq(lab.are_deterministic_algorithms_enabled(), false, "off by default")
  T.raises(function() lab.use_deterministic_algorithms(1) end, "use_deterministic_algorithms", "boolean expected")
  lab.use_deterministic_algorithms(true)
  local ok, err = pcall(function()
    for _, dt in ipairs({ "bf16", "f16" }) do
      local tol = dt == "bf16" and 3e-2 or 4e-3
      for i, D in ipairs({ 64, 96, 128, 256 }) do
        local causal = i % 2 == 1
        local interp = G.dev == "sim" and lab.sim.available and os.getenv("LLMLAB_SIMT") ~= "0"
        if interp then lab.sim.reset() end
        local got, inp = case(1, 2, 70, 100, D, causal, dt, tol)
        local again = { run(inp[1], inp[2], inp[3], inp[4], G.dev, dt, { causal = causal, impl = "flash" }) }
        local label = string.format("%s D=%d causal=%s", dt, D, tostring(causal))
        T.eq((got[2]:cpu():to("f64") - again[2]:cpu():to("f64")):abs():max():item(), 0, label .. ": dq the same bits twice")
        if interp then
          local seen = {}
          for _, st in ipairs(lab.sim.stats()) do seen[st.kernel:match("^[%w_]+")] = true end
          T.ok(seen.flash_bwd_dq_k and not seen.flash_bwd_post_k, label .. ": dq by flash_bwd_dq_k, not the atomic sums")
        end
      end
    end
  end)
  lab.use_deterministic_algorithms(false)
  if not ok then error(err, 0) end
end)

T.test("lab.sdpa dispatches to the flash kernel where it applies", function()
  local x = lab.randn(1, 2, 8, 64, { device = G.dev }):to("bf16"):requires_grad_()
  T.eq(lab.sdpa(x, x, x).grad_fn, "sdpa_flash", "bf16, D=64: flash by default")
  if G.dev == "cuda" then
    local f = lab.randn(1, 2, 8, 64, { device = G.dev }):requires_grad_()
    T.eq(lab.sdpa(f, f, f).grad_fn, "sdpa", "f32 on cuda: math (the kernels take bf16 and f16)")
    local odd = lab.randn(1, 2, 8, 48, { device = G.dev }):to("bf16")
    T.raises(function() lab.sdpa(odd, odd, odd, { impl = "flash" }) end, "impl='flash' has no kernel on cuda",
      "head dim 64, 96, 128 or 256")
  end
end)

T.finish()
