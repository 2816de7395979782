"""PyTorch SDPA on the same GPU as scripts/bench/gpu_attention.lua, the same configurations,
counts and table: the flash and cuDNN backends (torch.nn.attention.sdpa_kernel), bf16.
    python3 scripts/bench/gpu_attention_torch.py [T ...]"""
import sys
import time

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("no CUDA device")
    sys.exit(77)
from torch.nn.attention import SDPBackend, sdpa_kernel

lengths = [int(a) for a in sys.argv[1:]] or [512, 1024, 2048, 4096, 8192, 16384]
backends = [("t-flash", SDPBackend.FLASH_ATTENTION), ("t-cudnn", SDPBackend.CUDNN_ATTENTION)]


def timed(fn, iters):
    fn()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters, torch.cuda.max_memory_allocated() - before


print(f"{'impl':8s} {'D':>4s} {'T':>6s} {'causal':6s} {'pass':8s} {'ms':>10s} {'TFLOP/s':>9s} {'peak MiB':>12s}")
for D in (64, 128):
    for causal in (False, True):
        for T in lengths:
            B, H = max(1, 16384 // T), 2048 // D
            q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            fwd_flops = 4.0 * B * H * T * T * D / (2 if causal else 1)
            iters = 3 if T >= 8192 else 5
            for name, be in backends:
                try:
                    with sdpa_kernel(be):
                        def fwd():
                            with torch.no_grad():
                                F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                        def fwdbwd():
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
                            q.grad = k.grad = v.grad = None

                        sf, mf = timed(fwd, iters)
                        sb, mb = timed(fwdbwd, iters)
                except RuntimeError as e:
                    print(f"{name:8s} {D:4d} {T:6d} {str(causal):6s} unavailable: {str(e).splitlines()[0][:80]}")
                    continue
                print(f"{name:8s} {D:4d} {T:6d} {str(causal):6s} {'fwd':8s} {sf * 1e3:10.3f} {fwd_flops / sf / 1e12:9.1f} {mf / 2**20:12.1f}")
                print(f"{name:8s} {D:4d} {T:6d} {str(causal):6s} {'fwd+bwd':8s} {sb * 1e3:10.3f} {3.5 * fwd_flops / sb / 1e12:9.1f} {mb / 2**20:12.1f}")
                sys.stdout.flush()
            del q, k, v
            torch.cuda.empty_cache()
