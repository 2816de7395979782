-- Docstrings of lab.ddp (help(lab.ddp.wrap)): lua/lab/ddp.lua.
return {
  wrap = "lab.ddp.wrap(model[, {group=, bucket_mb=25, overlap=, broadcast_parameters=, find_unused_parameters=}]) -> ddp: gradients all-reduced in buckets during backward",
  is_wrapper = "lab.ddp.is_wrapper(x) -> boolean: true for what lab.ddp.wrap returns",
}
