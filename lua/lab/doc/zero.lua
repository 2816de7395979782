-- Docstrings of lab.zero (help(lab.zero.wrap)): lua/lab/zero.lua.
return {
  wrap = "lab.zero.wrap(model, {stage=1|2|3, lr=, betas=, eps=, weight_decay=, clip=, bucket_mb=, group=}) -> z: ZeRO-sharded AdamW; z:step()",
}
