-- bf16 GEMM through lab on a CUDA device: C = A B for square sizes (default 4096 and 8192),
-- f32 accumulation (cuBLASLt underneath); prints TFLOP/s to set beside peers/gpu_gemm_cublaslt.c
-- and gpu_gemm_torch.py on the same GPU.   build/llmlab scripts/bench/gpu_gemm.lua 4096 8192
if not lab.cuda.is_available() then
  print("no CUDA device: " .. lab.cuda.status())
  os.exit(77)
end
local sizes = {}
for i = 1, #arg do sizes[#sizes + 1] = tonumber(arg[i]) end
if #sizes == 0 then sizes = { 4096, 8192 } end
for _, n in ipairs(sizes) do
  local a = lab.randn(n, n, { device = "cuda" }):to("bf16")
  local b = lab.randn(n, n, { device = "cuda" }):to("bf16")
  for _ = 1, 3 do local _ = a:matmul(b) end
  lab.cuda.synchronize()
  local iters = n >= 8192 and 10 or 30
  local t0 = lab.clock()
  for _ = 1, iters do local _ = a:matmul(b) end
  lab.cuda.synchronize()
  local s = (lab.clock() - t0) / iters
  print(string.format("lab       bf16 %5d x %5d x %5d  %8.3f ms  %7.1f TFLOP/s", n, n, n, s * 1e3, 2 * n ^ 3 / s / 1e12))
end
