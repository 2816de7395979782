-- Docstrings of lab.moe (help(lab.moe.stats)): lua/lab/moe.lua.
return {
  layers = "lab.moe.layers(model) -> list: the MoE layers of a model, in registration order",
  aux_total = "lab.moe.aux_total(model) -> tensor|nil: the weighted aux and z losses of every MoE layer after a forward",
  stats = "lab.moe.stats(model[, opts]) -> table: tokens per expert, dropped tokens, imbalance, aux loss",
  sync_gradients = "lab.moe.sync_gradients(model[, {dp_group=, expert_dp_group=}]): averages dense and expert gradients over their groups",
  all_to_all_bytes = "lab.moe.all_to_all_bytes(layer, tokens, elem_bytes) -> bytes: what the dispatch sends off this rank",
  copy_from_full = "lab.moe.copy_from_full(model, full[, {tp_group=, rename=}]) -> model: this rank's experts and slices from an unsharded model",
  slice_of = "lab.moe.slice_of(p, t[, tp_group]) -> tensor: the tensor-parallel slice of t matching parameter p",
  -- class constructors (help(lab.X) shows this, then the class's methods)
  ExpertLinear = "lab.moe.ExpertLinear(experts, in, out[, {bias=true, first=0, total=}]) -> module: E stacked linear maps, x [E, R, in] -> [E, R, out]",
  MoE = "lab.moe.MoE(d_model, {experts=[, top_k=1, capacity_factor=, d_ff=, activation='gelu'|'swiglu', group=, ...]}) -> module: a routed mixture of expert MLPs",
}
