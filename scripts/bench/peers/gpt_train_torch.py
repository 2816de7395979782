"""Peer for scripts/bench/gpt_train.sh: the same GPT as lab.nn.GPT in PyTorch (Debian's
python3-torch, used only for benchmarking and reference values, never by llmlab itself).

  python3 gpt_train_torch.py speed THREADS STEPS [CONFIG] -> one line like gpt_step.lua
                                                           (CONFIG: tiny, base, big, long)
  python3 gpt_train_torch.py parity DIR STEPS           -> losses of STEPS steps from DIR's
                                                           initial weights and batches (.npy)
"""
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CFG = dict(vocab=512, d_model=256, n_layer=4, n_head=4, seq_len=128)
B, T = 8, 128
# gpt_step.lua's configurations: (model, batch)
CONFIGS = {
    "tiny": (dict(vocab=256, d_model=128, n_layer=2, n_head=4, seq_len=64), 8),
    "base": (CFG, 8),
    "big": (dict(vocab=2048, d_model=512, n_layer=8, n_head=8, seq_len=256), 8),
    "long": (dict(vocab=512, d_model=256, n_layer=4, n_head=4, seq_len=1024), 2),
}


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        Bn, Tn, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        heads = lambda t: t.view(Bn, Tn, self.h, C // self.h).transpose(1, 2)
        # PyTorch 1.13 has no fused SDPA on CPU: the materialised form, as llmlab's sdpa
        att = (heads(q) @ heads(k).transpose(-2, -1)) / math.sqrt(C // self.h)
        mask = torch.ones(Tn, Tn, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ heads(v)).transpose(1, 2).contiguous().view(Bn, Tn, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, d_model, n_layer, n_head, seq_len):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def optimizer(model, lr):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-8)


def speed(threads, steps, name="base"):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg, B = CONFIGS[name]
    T = cfg["seq_len"]
    model = GPT(**cfg)
    opt = optimizer(model, 3e-4)
    ids = torch.randint(0, cfg["vocab"], (B, T))
    tg = torch.randint(0, cfg["vocab"], (B, T))

    def step():
        loss = model(ids, tg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    dt, dc = (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"torch config={name} threads={threads} openblas={os.environ.get('OPENBLAS_NUM_THREADS', '-')} "
          f"tokens_per_s={B * T / dt:.0f} ms_per_step={dt * 1e3:.1f} cpu_ms_per_step={dc * 1e3:.1f} "
          f"peak_rss_mib={rss:.0f}")


# llmlab's state_dict names -> this module's parameters
def load(model, d):
    names = {"wte.weight": model.wte.weight, "wpe.weight": model.wpe.weight,
             "ln_f.weight": model.ln_f.weight, "ln_f.bias": model.ln_f.bias}
    for i, b in enumerate(model.blocks, start=1):
        p = f"blocks.{i}."
        names.update({p + "ln1.weight": b.ln1.weight, p + "ln1.bias": b.ln1.bias,
                      p + "attn.qkv.weight": b.qkv.weight, p + "attn.qkv.bias": b.qkv.bias,
                      p + "attn.proj.weight": b.attn_proj.weight, p + "attn.proj.bias": b.attn_proj.bias,
                      p + "ln2.weight": b.ln2.weight, p + "ln2.bias": b.ln2.bias,
                      p + "mlp.fc.weight": b.fc.weight, p + "mlp.fc.bias": b.fc.bias,
                      p + "mlp.proj.weight": b.mlp_proj.weight, p + "mlp.proj.bias": b.mlp_proj.bias})
    with torch.no_grad():
        for name, param in names.items():
            param.copy_(torch.from_numpy(np.load(os.path.join(d, name + ".npy"))))


def parity(d, steps):
    torch.set_num_threads(1)
    model = GPT(**CFG)
    load(model, d)
    opt = optimizer(model, 1e-3)
    losses = []
    for s in range(steps):
        ids = torch.from_numpy(np.load(os.path.join(d, f"ids{s}.npy")))
        tg = torch.from_numpy(np.load(os.path.join(d, f"tg{s}.npy")))
        loss = model(ids, tg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(" ".join(f"{l:.8f}" for l in losses))


if __name__ == "__main__":
    if sys.argv[1] == "speed":
        speed(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "base")
    else:
        parity(sys.argv[2], int(sys.argv[3]))
