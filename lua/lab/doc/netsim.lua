-- Docstrings of lab.netsim, the network model (help(lab.netsim.ring)): lua/lab/netsim.lua.
return {
  cluster = "lab.netsim.cluster(spec) -> cluster: nodes, GPUs per node, links and their bandwidths",
  ring = "lab.netsim.ring(c, bytes[, seed]) -> {time=, algbw=, busbw=, bottleneck=}: a ring all-reduce on the cluster",
  tree = "lab.netsim.tree(c, bytes[, seed]) -> {time=, algbw=, busbw=, bottleneck=}: a tree all-reduce",
  expected_ring = "lab.netsim.expected_ring(c, bytes) -> time, probability: the ring's expected time over ECMP draws",
  from_alpha_beta = "lab.netsim.from_alpha_beta(alpha, beta, n) -> cluster: one whose ring matches latency alpha and beta s/byte",
}
