-- Docstrings of lab.fault, faults a lab plants on purpose (help(lab.fault.flip_bit)): lua/lab/fault.lua.
return {
  step = "lab.fault.step(k): tells the faults that step k starts (fires what is due then on this rank)",
  current_step = "lab.fault.current_step() -> integer: the step last given to lab.fault.step",
  flip_bit = "lab.fault.flip_bit{what='param'|'grad'|'optimizer', rank=, step=, index=, bit=, ...}: silent data corruption",
  corrupt_collective = "lab.fault.corrupt_collective{rank=, step=, mode='element'|'bit'|'wrong_op', ...}: one all_reduce returns a wrong result on one rank",
  straggler = "lab.fault.straggler{rank=, delay=s|{min, max}, from=, to=}: that rank sleeps before its work at each step",
  overflow = "lab.fault.overflow{model=, name=, scale=, cols=, rank=, step=}: a module's output is scaled inside its forward",
  nan = "lab.fault.nan{op=, backward=false, rank=, step=}: a NaN in the next output (or input gradient) of that op",
  clear = "lab.fault.clear(): disarms every fault and removes every wrapper and hook",
}
