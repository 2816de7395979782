-- Docstrings of lab.lora (help(lab.lora.apply)): lua/lab/lora.lua.
return {
  apply = "lab.lora.apply(model[, {r=, alpha=, targets=}]) -> params: wraps target Linears in LoRALinear, freezes the rest",
  merge = "lab.lora.merge(model): replaces every LoRALinear by its merged Linear (same outputs)",
  trainable = "lab.lora.trainable(model) -> params: the parameters that require gradients",
}
