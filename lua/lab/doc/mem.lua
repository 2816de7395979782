-- Docstrings of lab.mem (help(lab.mem.stats)): bound in lua/l_mem.c;
-- estimate and report in lua/lab/mem.lua.
return {
  stats = "lab.mem.stats([device]) -> {current=, peak=, tags={param=, grad=, ...}, cached=, device=}: bytes by category",
  reset_peak = "lab.mem.reset_peak([device]): the peak starts again from the current use",
  empty_cache = "lab.mem.empty_cache([device]): returns cached blocks to the device",
  tag = "lab.mem.tag(t, category): counts t's bytes under 'param', 'grad', 'optimizer', 'activation', 'comm' or 'other'",
  estimate = "lab.mem.estimate(opts) -> table: bytes per rank of params, grads, optimizer state and activations for a layout",
  report = "lab.mem.report([group]): prints every rank's memory by category, equal ranks once",
}
