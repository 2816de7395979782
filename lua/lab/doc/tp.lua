-- Docstrings of lab.tp, tensor parallelism (help(lab.tp.grid)): lua/lab/tp.lua.
return {
  grid = "lab.tp.grid({tp=, pp=, dp=, cp=, ep=}) -> grid: the process groups of a layout (as lab.dist.grid)",
  rng_tracker = "lab.tp.rng_tracker(grid[, seed]) -> tracker: Megatron's RNG tracker (dropout differs across TP ranks only where it should)",
  mark_split = "lab.tp.mark_split(t, dim[, stride]): records that t is this rank's split of a full tensor along dim",
  hook_sequence_parallel_grads = "lab.tp.hook_sequence_parallel_grads(model[, group]): all-reduces the gradients of sequence-parallel norms",
  vocab_parallel_cross_entropy = "lab.tp.vocab_parallel_cross_entropy(logits, target[, group]) -> loss: cross-entropy over vocab-sharded logits",
}
