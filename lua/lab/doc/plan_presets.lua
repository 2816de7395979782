-- Docstrings of lab.plan_presets (help(lab.plan_presets.free_options)): lua/lab/plan_presets.lua.
return {
  free_options = "lab.plan_presets.free_options(values) -> table: the option values of the planner's free terms that are not GPU fields",
  apply_free = "lab.plan_presets.apply_free(gpus, values): sets the free fractions of each GPU preset of that generation",
}
