# PyTorch eager peer of scripts/bench/gpu_gpt2.lua: GPT-2 small (124M) with the same config,
# bf16 autocast, AdamW, random token batches; tokens/s and MFU over 10 steps after 2 of warm-up.
#   python3 scripts/bench/gpu_gpt2_torch.py [batch] [steps]
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("no CUDA device")
    sys.exit(77)
B = int(sys.argv[1]) if len(sys.argv) > 1 else 8
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
V, C, L, H, T = 50257, 768, 12, 12, 1024


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(x.shape[0], T, H, C // H).transpose(1, 2) for t in (q, k, v))
        # eager attention, the math lab's sdpa does (no fused kernel)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(torch.ones(T, T, device=x.device, dtype=torch.bool).triu(1), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(x.shape)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(T, device=ids.device))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()


m = GPT().cuda()
opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
n_params = sum(p.numel() for p in m.parameters()) - m.wpe.weight.numel()
flops_per_token = 6 * n_params + 12 * L * T * C


def step():
    ids = torch.randint(0, V, (B, T), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(m(ids).float().view(-1, V), ids.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


for _ in range(2):
    step()
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(STEPS):
    loss = step()
torch.cuda.synchronize()
s = (time.perf_counter() - t0) / STEPS
tok = B * T / s
print(f"torch GPT-2 124M bf16 batch {B} x {T}: {s * 1e3:.1f} ms/step, {tok:.0f} tokens/s, "
      f"MFU {100 * tok * flops_per_token / 989e12:.1f}% (loss {loss.item():.3f})")
