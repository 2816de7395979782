"""PyTorch CPU peer of scripts/bench/attention.lua: causal attention forward and forward +
backward at one length, the way PyTorch 1.13 computes it on the CPU (it has no fused SDPA
before 2.0: q k^T, the mask, softmax, @ v; autograd keeps the T x T probabilities).
Prints one line: fwd_cpu_s fwd_wall_s fwdbwd_cpu_s fwdbwd_wall_s peak_rss_growth_bytes.
    python3 attention_torch.py T threads [B H D reps]"""
import math
import resource
import sys
import time

import torch

T, threads = int(sys.argv[1]), int(sys.argv[2])
B, H, D, reps = (int(x) for x in (sys.argv[3:7] if len(sys.argv) > 6 else (1, 8, 64, 2)))
torch.set_num_threads(threads)
torch.manual_seed(0)
q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
mask = torch.ones(T, T, dtype=torch.bool).tril()
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def attention():
    s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ v


def best(fn):
    cpu, wall = math.inf, math.inf
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu, wall = min(cpu, time.process_time() - c0), min(wall, time.perf_counter() - w0)
    return cpu, wall


def fwd():
    with torch.no_grad():
        attention()


def fwdbwd():
    attention().sum().backward()
    q.grad = k.grad = v.grad = None


fc, fw = best(fwd)
bc, bw = best(fwdbwd)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
print(f"{fc:.4f} {fw:.4f} {bc:.4f} {bw:.4f} {peak}")
