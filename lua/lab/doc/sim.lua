-- Docstrings of lab.sim, what the SIMT interpreter recorded on the sim device
-- (help(lab.sim.stats)): lua/l_sim.c.
return {
  stats = "lab.sim.stats() -> list: one record per interpreted kernel (launches, grid, block, shared bytes, blocks, hazards)",
  reset = "lab.sim.reset(): forgets the records",
  perf = "lab.sim.perf(on): the interpreter's performance counters on or off",
  perf_report = "lab.sim.perf_report() -> string: the performance counters as a table",
  hazards = "lab.sim.hazards() -> count, report: racecheck/synccheck/memcheck hazards found, and the last report",
}
