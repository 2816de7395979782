# torch.matmul in bf16 on the same GPU as scripts/bench/gpu_gemm.lua, the same sizes and timing.
#   python3 scripts/bench/gpu_gemm_torch.py 4096 8192
import sys
import time

import torch

sizes = [int(a) for a in sys.argv[1:]] or [4096, 8192]
if not torch.cuda.is_available():
    print("no CUDA device")
    sys.exit(77)
for n in sizes:
    a = torch.randn(n, n, device="cuda").bfloat16()
    b = torch.randn(n, n, device="cuda").bfloat16()
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    iters = 10 if n >= 8192 else 30
    t0 = time.perf_counter()
    for _ in range(iters):
        a @ b
    torch.cuda.synchronize()
    s = (time.perf_counter() - t0) / iters
    print(f"torch     bf16 {n:5d} x {n:5d} x {n:5d}  {s * 1e3:8.3f} ms  {2 * n ** 3 / s / 1e12:7.1f} TFLOP/s")
