-- Docstrings of lab.monitor (help(lab.monitor.new)): lua/lab/monitor.lua.
return {
  new = "lab.monitor.new(model[, {optimizer=, amp=, jsonl=, group=, ...}]) -> mon: watches each step; mon:begin(k), mon:check{loss=}, mon:finish()",
  diagnose = "lab.monitor.diagnose(rec[, world]) -> {layer=, ranks=, module=, why=}|nil: the layer of a step's alarms from its measurements",
  check_replicas = "lab.monitor.check_replicas(model[, {group=, optimizer=, amp=}]) -> list: parameters (and optimizer state) that differ across the group, {} when all agree",
  compare = "lab.monitor.compare(named[, group]) -> list: of (name, tensor) pairs, {name=, ranks=} for each that differs across ranks",
  to_json = "lab.monitor.to_json(v) -> string: a record as one JSON object (non-finite numbers as strings)",
}
