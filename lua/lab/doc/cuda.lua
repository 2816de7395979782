-- Docstrings of lab.cuda (help(lab.cuda.is_available)), bound in lua/l_device.c.
return {
  is_available = "lab.cuda.is_available() -> boolean: whether a CUDA device can be used",
  device_count = "lab.cuda.device_count() -> integer: the CUDA devices this rank sees",
  synchronize = "lab.cuda.synchronize([device]): waits for the work queued on a CUDA device",
  sim_host_syncs = "lab.cuda.sim_host_syncs() -> integer: host synchronizations the sim device counted so far (where a GPU's host would wait for its stream)",
  sim_nccl_calls = "lab.cuda.sim_nccl_calls() -> integer: NCCL calls the sim's NCCL on MPI posted so far (shows a collective took the NCCL path)",
  status = "lab.cuda.status() -> string: why CUDA is or is not available (toolkit, driver, devices)",
}
