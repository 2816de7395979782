-- Attention on a CUDA device: lab.sdpa's FlashAttention-2 kernels (impl='flash',
-- kernels/cuda/flash_attention*.cu) against math attention (impl='math': the T x T scores
-- through cuBLASLt and the softmax kernels), bf16, 16k tokens per batch (B = 16384 / T) and
-- 2048 channels (H = 2048 / D) as in the FlashAttention-2 paper's benchmark; head dims 64, 96,
-- 128 and 256, causal and not, forward and forward + backward. Prints ms, TFLOP/s (the paper's count:
-- 4 B H T^2 D for the forward, halved when causal; backward 2.5x the forward) and peak device
-- memory above the inputs, to set beside gpu_attention_torch.py (PyTorch SDPA, flash and cuDNN
-- backends) on the same GPU. Math is skipped beyond 4096 (its scores alone would take
-- B H T^2 4 bytes and the run would not fit the GPU check's budget).
--   build/llmlab scripts/bench/gpu_attention.lua [T ...] [deterministic]
-- (deterministic: lab.use_deterministic_algorithms(true), the backward's dq in a fixed order)
-- Target (issue 14): forward >= 300 TFLOP/s at D=128, T >= 4096, non-causal, bf16 on an H200.
if not lab.cuda.is_available() then
  print("no CUDA device: " .. lab.cuda.status())
  os.exit(77)
end
local lengths = {}
for i = 1, #arg do
  if arg[i] == "deterministic" then lab.use_deterministic_algorithms(true)
  else lengths[#lengths + 1] = tonumber(arg[i]) or error("gpu_attention: argument " .. i .. " (" .. arg[i] .. ") is neither a length nor 'deterministic'", 0) end
end
if #lengths == 0 then lengths = { 512, 1024, 2048, 4096, 8192, 16384 } end

local function timed(fn, iters)
  fn() -- warm-up (and the kernels' shared-memory attribute)
  lab.cuda.synchronize()
  local before = lab.mem.stats("cuda").current
  lab.mem.reset_peak()
  local t0 = lab.clock()
  for _ = 1, iters do fn() end
  lab.cuda.synchronize()
  return (lab.clock() - t0) / iters, lab.mem.stats("cuda").peak - before
end

print(string.format("%-6s %4s %6s %-6s %-8s %10s %9s %12s", "impl", "D", "T", "causal", "pass", "ms", "TFLOP/s", "peak memory"))
for _, D in ipairs({ 64, 96, 128, 256 }) do
  for _, causal in ipairs({ false, true }) do
    for _, T in ipairs(lengths) do
      local B, H = math.max(1, 16384 // T), 2048 // D
      local q = lab.randn(B, H, T, D, { device = "cuda" }):to("bf16"):requires_grad_()
      local k = lab.randn(B, H, T, D, { device = "cuda" }):to("bf16"):requires_grad_()
      local v = lab.randn(B, H, T, D, { device = "cuda" }):to("bf16"):requires_grad_()
      local fwd_flops = 4.0 * B * H * T * T * D / (causal and 2 or 1)
      for _, impl in ipairs({ "flash", "math" }) do
        if impl == "flash" or T <= 4096 then
          local opts = { causal = causal, impl = impl }
          local iters = T >= 8192 and 3 or 5
          local sf, mf = timed(function() lab.no_grad(function() lab.sdpa(q, k, v, opts):close() end) end, iters)
          local sb, mb = timed(function()
            local o = lab.sdpa(q, k, v, opts)
            o:sum():backward()
            o:close()
            q.grad, k.grad, v.grad = nil, nil, nil
          end, iters)
          print(string.format("%-6s %4d %6d %-6s %-8s %10.3f %9.1f %12s", impl, D, T, tostring(causal), "fwd", sf * 1e3,
            fwd_flops / sf / 1e12, lab.format_bytes(mf)))
          print(string.format("%-6s %4d %6d %-6s %-8s %10.3f %9.1f %12s", impl, D, T, tostring(causal), "fwd+bwd",
            sb * 1e3, 3.5 * fwd_flops / sb / 1e12, lab.format_bytes(mb)))
          io.stdout:flush()
        end
      end
      q:close(); k:close(); v:close()
      lab.mem.empty_cache()
    end
  end
end
