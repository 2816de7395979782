-- Docstrings of lab.optim (help(lab.optim.AdamW)): lua/lab/optim.lua.
return {
  SGD = "lab.optim.SGD(params, {lr=, momentum=, weight_decay=}) -> opt: opt:step(), opt:zero_grad()",
  AdamW = "lab.optim.AdamW(params, {lr=, betas=, eps=, weight_decay=}) -> opt: fused AdamW; opt:step(), opt:zero_grad()",
  clip_grad_norm = "lab.optim.clip_grad_norm(params, max_norm[, opts]) -> norm: scales gradients to a global norm of at most max_norm",
  warmup_cosine = "lab.optim.warmup_cosine(step, {lr=, min_lr=, warmup=, max_steps=}) -> lr: linear warm-up then cosine decay",
}
