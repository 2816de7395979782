-- lab.flash_block and lab.flash_block_backward where the cuda device's tensor-core kernels
-- refuse the case (f32, f64, head dims other than 64, 96, 128 and 256, Dv != D): the math path with the
-- kernels' contract (runtime/autograd/attention_block_math.c), every value of out, lse, dq, dk
-- and dv against the cpu's FlashAttention kernel; causal with T = S, T < S and T > S (queries
-- that see no key: out 0, lse -inf, as the kernels give), strided inputs. Ring attention
-- (lab.cp) calls these on f32 blocks of head dim 4: before the fallback they raised
-- "flash_block: no FlashAttention kernel on sim for f32 with head dims 4 and 4".
-- Run: build/llmlab --device sim tests/sim/test_flash_block.lua (ctest: sim.test_flash_block)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
lab.manual_seed(11)

-- every element: |a - b| <= tol, and -inf where the other is -inf
local function same(a, b, what, tol)
  a, b = a:to("cpu"):to("f64"), b:to("cpu"):to("f64")
  T.eq(table.concat(a.shape, "x"), table.concat(b.shape, "x"), what .. " shape")
  local inf_a, inf_b = a:eq(-math.huge), b:eq(-math.huge)
  T.ok((inf_a:to("i64") - inf_b:to("i64")):abs():sum():item() == 0, what .. ": -inf at the same places")
  local fa, fb = lab.where(inf_a, 0, a), lab.where(inf_b, 0, b)
  local d = (fa - fb):abs():max():item()
  T.ok(d <= tol, string.format("%s: max |sim - cpu| = %.3g > %.3g", what, d, tol))
end

local function case(B, H, Tq, S, D, Dv, causal, dt, tol, strided)
  local name = string.format("%s B=%d H=%d T=%d S=%d D=%d Dv=%d causal=%s%s", dt, B, H, Tq, S, D, Dv,
    tostring(causal), strided and " strided" or "")
  local cpu = { device = "cpu" }
  local q, k, v = lab.randn(B, H, Tq, D, cpu), lab.randn(B, H, S, D, cpu), lab.randn(B, H, S, Dv, cpu)
  local dout = lab.randn(B, H, Tq, Dv, cpu)
  if strided then -- [B, T, H, D] in memory, as the head split leaves q
    q = lab.randn(B, Tq, H, D, cpu):transpose(2, 3)
  end
  q, k, v, dout = q:to(dt), k:to(dt), v:to(dt), dout:to(dt)
  local ref_dt = dt == "f64" and "f32" or dt -- the cpu's kernels take f32, bf16, f16
  local function on(x, d) return x:to(d):to(d == "cpu" and ref_dt or dt) end
  local o1, l1 = lab.flash_block(on(q, "cpu"), on(k, "cpu"), on(v, "cpu"), { causal = causal })
  local o2, l2 = lab.flash_block(q:to("sim"), k:to("sim"), v:to("sim"), { causal = causal })
  T.eq(o2.dtype, dt, name .. " out dtype")
  T.eq(l2.dtype, "f32", name .. " lse dtype")
  same(o2, o1, name .. " out", tol)
  same(l2, l1, name .. " lse", tol)
  local a1, b1, c1 = lab.flash_block_backward(on(q, "cpu"), on(k, "cpu"), on(v, "cpu"), o1, on(dout, "cpu"), l1,
    { causal = causal })
  local a2, b2, c2 = lab.flash_block_backward(q:to("sim"), k:to("sim"), v:to("sim"), o2, dout:to("sim"), l2,
    { causal = causal })
  same(a2, a1, name .. " dq", tol * 4)
  same(b2, b1, name .. " dk", tol * 4)
  same(c2, c1, name .. " dv", tol * 4)
end

T.test("flash_block falls back to the math path where the cuda kernels refuse, = the cpu kernel", function()
  for _, causal in ipairs({ false, true }) do
    case(2, 3, 9, 9, 4, 4, causal, "f32", 2e-5)      -- ring attention's blocks (lab.cp)
    case(1, 2, 7, 19, 8, 8, causal, "f32", 2e-5)     -- T < S
    case(1, 2, 19, 7, 8, 16, causal, "f32", 2e-5)    -- T > S: causal queries that see no key
    case(1, 2, 12, 12, 16, 16, causal, "f64", 2e-5)  -- f64 (reference: the cpu's f32)
    case(1, 2, 10, 10, 32, 32, causal, "bf16", 3e-2) -- bf16, a head dim the tensor cores refuse
  end
  case(2, 2, 6, 6, 8, 8, true, "f32", 2e-5, true)
end)

T.finish()
