# Reference values for tests/lua/test_posttrain.lua, computed with PyTorch from the formulas
# of the DPO paper (Rafailov et al. 2023) and DeepSeekMath's GRPO (Shao et al. 2024), as TRL
# writes them: log_softmax + gather, F.logsigmoid, torch.std (unbiased), clamp, the k3 KL.
# The test embeds the printed numbers; run `/usr/bin/python3 posttrain_reference.py` to see
# them again. Inputs are defined by formulas that the test repeats in Lua.
import math
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

def formula(shape, a, b, c):
    n = 1
    for s in shape:
        n *= s
    return torch.tensor([c * math.sin(a * i + b) for i in range(n)]).view(*shape)

def ids(shape, mul, add, V):
    n = 1
    for s in shape:
        n *= s
    return torch.tensor([(i * mul + add) % V for i in range(n)]).view(*shape)

def token_logprobs(logits, targets):
    return logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)

def lua_list(t):
    return "{ " + ", ".join("%.17g" % v for v in t.reshape(-1).tolist()) + " }"

# DPO: 3 pairs, completions of 2 tokens over 5 symbols; rows 1-3 chosen, 4-6 rejected
B, R, V, beta = 3, 2, 5, 0.5
pol = formula((2 * B, R, V), 0.7, 0.3, 2.0).requires_grad_()
ref = formula((2 * B, R, V), 1.3, -0.2, 1.5)
tg = ids((2 * B, R), 3, 1, V)
pi = token_logprobs(pol, tg).sum(-1)
rf = token_logprobs(ref, tg).sum(-1)
logits = beta * ((pi[:B] - rf[:B]) - (pi[B:] - rf[B:]))
loss = -F.logsigmoid(logits).mean()
loss.backward()
print("dpo_loss = %.17g" % loss.item())
print("dpo_margin = %.17g" % logits.mean().item())
print("dpo_reward_chosen = %.17g" % (beta * (pi[:B] - rf[:B])).mean().item())
print("dpo_accuracy = %.17g" % (logits > 0).double().mean().item())
print("dpo_grad = " + lua_list(pol.grad))

# GRPO: 4 completions of 3 tokens over 5 symbols, groups of G = 2, eps = 0.2, beta = 0.04
N, R, V, G, eps, kl_beta = 4, 3, 5, 2, 0.2, 0.04
rewards = torch.tensor([1.0, 0.0, 0.5, 0.25])
mean = rewards.view(-1, G).mean(1).repeat_interleave(G)
std = rewards.view(-1, G).std(1).repeat_interleave(G)
adv = (rewards - mean) / (std + 1e-4)
pol = formula((N, R, V), 0.9, 0.1, 1.5).requires_grad_()
old = formula((N, R, V), 0.9, 0.1, 1.5) + formula((N, R, V), 2.1, 0.5, 0.6)
ref = formula((N, R, V), 0.4, 1.0, 1.0)
tg = ids((N, R), 2, 3, V)
logp = token_logprobs(pol, tg)
old_lp = token_logprobs(old, tg)
ref_lp = token_logprobs(ref, tg)
ratio = torch.exp(logp - old_lp)
A = adv.unsqueeze(1)
surr = torch.min(ratio * A, torch.clamp(ratio, 1 - eps, 1 + eps) * A)
kl = torch.exp(ref_lp - logp) - (ref_lp - logp) - 1
obj = (surr - kl_beta * kl).mean(1).mean()
(-obj).backward()
print("grpo_adv = " + lua_list(adv))
print("grpo_loss = %.17g" % (-obj).item())
print("grpo_kl = %.17g" % kl.mean().item())
print("grpo_clip_fraction = %.17g" % ((ratio < 1 - eps) | (ratio > 1 + eps)).double().mean().item())
print("grpo_grad = " + lua_list(pol.grad))
