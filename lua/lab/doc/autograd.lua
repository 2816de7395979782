-- Docstrings of lab.autograd (help(lab.autograd.backward)): "signature: one line". Bound in
-- lua/l_autograd.c (its dist table in l_autograd_dist.c); gradcheck in lua/lab/autograd.lua. The dist ones take (x[, {group=, dim=}]).
return {
  backward = "lab.autograd.backward(t[, grad][, {retain_graph=}]): backpropagates from t, as t:backward()",
  Function = "lab.autograd.Function{forward=, backward=} -> F: a custom op; F(...) runs forward and records backward",
  queue_callback = "lab.autograd.queue_callback(fn): fn() once the running backward has finished",
  detect_anomaly = "lab.autograd.detect_anomaly([fn, ...]): runs fn in anomaly mode (a NaN names the op that made it), or returns a guard",
  set_detect_anomaly = "lab.autograd.set_detect_anomaly(on): anomaly mode on or off",
  is_anomaly_enabled = "lab.autograd.is_anomaly_enabled() -> boolean: whether anomaly mode is on",
  gradcheck = "lab.autograd.gradcheck(fn, inputs[, opts]) -> ok[, msg]: analytic gradients against finite differences",
  ["dist.all_reduce"] = "lab.autograd.dist.all_reduce(x[, {group=}]) -> tensor: sum over ranks; backward all-reduces the gradient",
  ["dist.all_gather"] = "lab.autograd.dist.all_gather(x[, {group=, dim=}]) -> tensor: ranks' x concatenated; backward keeps this rank's slice of the summed gradient",
  ["dist.reduce_scatter"] = "lab.autograd.dist.reduce_scatter(x[, {group=, dim=}]) -> tensor: sum, then this rank's block; backward all-gathers",
  ["dist.all_to_all_single"] = "lab.autograd.dist.all_to_all_single(x[, {output_split_sizes=, input_split_sizes=, group=}]) -> tensor: differentiable all-to-all",
  ["dist.copy_to_region"] = "lab.autograd.dist.copy_to_region(x[, {group=}]) -> x: Megatron's f: identity forward, all-reduce backward",
  ["dist.reduce_from_region"] = "lab.autograd.dist.reduce_from_region(x[, {group=}]) -> tensor: Megatron's g: all-reduce forward, identity backward",
  ["dist.gather_from_region"] = "lab.autograd.dist.gather_from_region(x[, {group=, dim=}]) -> tensor: all-gather forward, split backward",
  ["dist.scatter_to_region"] = "lab.autograd.dist.scatter_to_region(x[, {group=, dim=}]) -> tensor: this rank's split forward, all-gather backward",
}
