-- Docstrings of lab.plan, the what-if planner (help(lab.plan.run)): lua/lab/plan.lua (the helpers:
-- plan_helpers.lua). m is a model (preset name or table), o the plan's options, c a layout {dp=, tp=, ...}.
return {
  run = "lab.plan.run{model=, gpus=, gpu=, global_batch=, seq=, ...} -> results: prints the ranked layouts (lab.plan{...} too)",
  cli = "lab.plan.cli(args) -> results: llmlab --plan's key=value arguments (none: usage and the presets)",
  published = "lab.plan.published([format]) -> rows, fit: the planner against published runs, each stack of sources fitted on the"
    .. " others (rows: predicted, error, range lo to hi: the open assumptions widened by the other stacks' error q, why);"
    .. " format 'table' or 'markdown' prints them, a summary per source, the folds' parameters and the rows outside their range",
  enumerate = "lab.plan.enumerate(o) -> results, infeasible, model, gpu: every layout evaluated, best first",
  evaluate = "lab.plan.evaluate(m, gpu, o, c[, lt]) -> result: memory, time and MFU of one layout",
  explain = "lab.plan.explain(r, m, gpu, o): prints one configuration's arithmetic line by line",
  range = "lab.plan.range(r, m, gpu, q[, given]): fills r's step time and MFU range (the open assumptions, widened by the"
    .. " model's LOSO error plan_presets.model_error) and the assumption that moves it most",
  layout = "lab.plan.layout(r) -> string: a layout as 'dp x tp x pp ...'",
  show_metric = "lab.plan.show_metric(metric, x) -> string: a metric's value as the table prints it",
  stages = "lab.plan.stages(L, p[, v]) -> list: L layers over p pipeline stages (v virtual stages each)",
  param_counts = "lab.plan.param_counts(m) -> table: the model's parameters by kind",
  model_flops = "lab.plan.model_flops(m, tokens, seq) -> number: the model FLOPs of training on tokens",
  hardware_flops = "lab.plan.hardware_flops(m, tokens, seq[, recompute, attention]) -> number: FLOPs the GPUs execute (recompute included)",
  activation_bytes_per_layer = "lab.plan.activation_bytes_per_layer(m, o, b, s, t[, recompute, sp]) -> bytes: one layer's saved activations",
  tp_bytes = "lab.plan.tp_bytes(m, o, c[, layers]) -> bytes: tensor-parallel traffic per step",
  pp_bytes = "lab.plan.pp_bytes(m, o, c) -> bytes: pipeline traffic per step",
  ep_bytes = "lab.plan.ep_bytes(m, o, c[, layers]) -> bytes: expert-parallel traffic per step",
  cp_bytes = "lab.plan.cp_bytes(m, o, c[, layers]) -> bytes: context-parallel traffic per step",
  dp_bytes = "lab.plan.dp_bytes(o, c, psi) -> bytes: data-parallel gradient traffic per step",
  ep_all_to_all_bytes = "lab.plan.ep_all_to_all_bytes(tokens, hidden, top_k, ep, elem_bytes, ...) -> bytes: one MoE all-to-all",
}
