-- Docstrings of lab.replicas, the wrappers' replicas and reset after a failed chunk
-- (help(lab.replicas.check)): lua/lab/replicas.lua.
return {
  check = "lab.replicas.check(model[, {group=}]) -> list: {name=, ranks=, agree=} for each parameter whose replicas differ",
  gather_checksums = "lab.replicas.gather_checksums(tensors[, group]) -> rows, ranks: rows[r] = {count, t:checksum() of each} of the group's r-th rank; ranks: their world ranks",
  restore = "lab.replicas.restore(model, src[, {group=}]): every parameter broadcast from rank src: the replicas agree again",
  register = "lab.replicas.register(w, kind, reset[, {model=, group=}]): a wrapper whose per-step state reset(w) clears after a failed chunk",
  touch = "lab.replicas.touch(w): a step of wrapper w starts (called once per backward)",
  settle = "lab.replicas.settle(handle): waits for a wrapper's pending collective after recovery matched it",
  tree = "lab.replicas.tree(title, module) -> string: the title and the wrapped module's tree, as a wrapper prints at the REPL",
}
