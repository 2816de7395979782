-- Docstrings of lab.cp, context parallelism (help(lab.cp.ring_attention)): lua/lab/cp.lua.
return {
  shard = "lab.cp.shard(x, dim[, {group=, zigzag=}]) -> tensor: this rank's positions of x along dim (differentiable)",
  positions = "lab.cp.positions(T, n, r[, zigzag]) -> {integer}: 0-based positions of rank r's tokens in T over n ranks",
  ring_attention = "lab.cp.ring_attention(q, k, v[, {group=, causal=, scale=, zigzag=, impl=}]) -> tensor: attention with K/V passed around the ring",
  allgather_attention = "lab.cp.allgather_attention(q, k, v[, opts]) -> tensor: attention after all-gathering K/V",
  sync_gradients = "lab.cp.sync_gradients(model[, group]): averages the replicas' gradients over the CP group",
  -- class constructors (help(lab.X) shows this, then the class's methods)
  GPT = "lab.cp.GPT(cfg[, {group=, attention='ring'|'allgather', zigzag=true, tp_group=}]) -> model: a context-parallel GPT, each rank its positions",
}
