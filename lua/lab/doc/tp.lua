-- Docstrings of lab.tp, tensor parallelism (help(lab.tp.grid)): lua/lab/tp.lua.
return {
  grid = "lab.tp.grid({tp=, pp=, dp=, cp=, ep=}) -> grid: the process groups of a layout (as lab.dist.grid)",
  rng_tracker = "lab.tp.rng_tracker(grid[, seed]) -> tracker: Megatron's RNG tracker (dropout differs across TP ranks only where it should)",
  mark_split = "lab.tp.mark_split(t, dim[, stride]): records that t is this rank's split of a full tensor along dim",
  hook_sequence_parallel_grads = "lab.tp.hook_sequence_parallel_grads(model[, group]): all-reduces the gradients of sequence-parallel norms",
  vocab_parallel_cross_entropy = "lab.tp.vocab_parallel_cross_entropy(logits, target[, group]) -> loss: cross-entropy over vocab-sharded logits",
  -- class constructors (help(lab.X) shows this, then the class's methods)
  ColumnParallelLinear = "lab.tp.ColumnParallelLinear(in, out[, {gather_output=true, group=, grid=, from=, bias=, sequence_parallel=}]) -> module: W split by output rows over the group",
  RowParallelLinear = "lab.tp.RowParallelLinear(in, out[, {input_is_parallel=true, group=, grid=, from=, bias=, sequence_parallel=}]) -> module: W split by input columns, outputs all-reduced",
  ParallelMLP = "lab.tp.ParallelMLP(d_model, d_ff[, {group=, grid=, from=, sequence_parallel=}]) -> module: Megatron's FFN, column-parallel, GELU, row-parallel",
  ParallelAttention = "lab.tp.ParallelAttention(cfg[, {group=, from=, gather_heads=, sequence_parallel=}]) -> module: attention split by heads over the group",
  VocabParallelEmbedding = "lab.tp.VocabParallelEmbedding(vocab, dim[, {group=, grid=, from=}]) -> module: embedding rows split over the group, all-reduced",
  Block = "lab.tp.Block(full, cfg, opts) -> module: a tensor-parallel twin of the lab.nn.Block full ({group=, sequence_parallel=, tracker=})",
  GPT = "lab.tp.GPT(cfg[, {grid= or group=, sequence_parallel=}]) -> model: a tensor-parallel GPT (cfg as lab.nn.GPT's, tied = false)",
}
