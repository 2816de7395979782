-- Docstrings of lab.ckpt (help(lab.ckpt.save)): lua/lab/ckpt.lua and ckpt_hf.lua.
return {
  save = "lab.ckpt.save(dir, {model=, optimizer=, step=, extra=, async=}) -> path: a sharded checkpoint of every rank (collective)",
  load = "lab.ckpt.load(dir, {model=, optimizer=}) -> {step=, extra=, path=}: the latest complete checkpoint, resharded to this layout (collective)",
  wait = "lab.ckpt.wait(): finishes an async save and commits it (collective); a failure on any rank raises on every rank",
  export_hf = "lab.ckpt.export_hf(dir, model): writes a GPT as Hugging Face GPT-2 model.safetensors + config.json",
  import_hf = "lab.ckpt.import_hf(dir, model): loads GPT-2 weights and checks config.json matches the model",
}
