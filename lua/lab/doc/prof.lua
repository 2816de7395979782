-- Docstrings of lab.prof, the profiler (help(lab.prof.section)): lua/lab/prof.lua.
return {
  start = "lab.prof.start(name): opens a section (nested in the open one)",
  stop = "lab.prof.stop(): closes the innermost open section",
  section = "lab.prof.section(name, fn, ...) -> fn's results: runs fn inside a section",
  scope = "lab.prof.scope(name) -> guard: a section closed with the to-be-closed local (local s <close> = ...)",
  reset = "lab.prof.reset(): forgets the totals",
  totals = "lab.prof.totals() -> {path = {time=, comm=, busy=, count=}}: this rank's section totals (seconds)",
  report = "lab.prof.report([group]) -> rows: prints each section's min/median/max over the ranks",
  trace = "lab.prof.trace(path[, group]): writes a Chrome trace (chrome://tracing, Perfetto) of every rank",
  kernels = "lab.prof.kernels([on=true]): turns the kernel profiler on or off (resets its totals)",
  kernel_table = "lab.prof.kernel_table([{print=true}]) -> {categories=, sim=}: this rank's kernel table since kernels(true), printed",
  kernel_totals = "lab.prof.kernel_totals() -> {category = {calls=, wall=, cpu=}}: time in kernels by category",
}
