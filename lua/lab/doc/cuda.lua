-- Docstrings of lab.cuda (help(lab.cuda.is_available)), bound in lua/l_device.c.
return {
  is_available = "lab.cuda.is_available() -> boolean: whether a CUDA device can be used",
  device_count = "lab.cuda.device_count() -> integer: the CUDA devices this rank sees",
  synchronize = "lab.cuda.synchronize([device]): waits for the work queued on a CUDA device (a cpu default: this rank's GPU, or its sim device where no GPU is)",
  sim_host_syncs = "lab.cuda.sim_host_syncs() -> integer: host synchronizations the sim device counted so far (where a GPU's host would wait for its stream)",
  sim_nccl_calls = "lab.cuda.sim_nccl_calls() -> integer: NCCL calls the sim's NCCL on MPI posted so far (shows a collective took the NCCL path)",
  sim_uploads = "lab.cuda.sim_uploads() -> integer: host-to-device copies the sim device counted so far (a Lua number in an op makes none)",
  sim_nccl_events = "lab.cuda.sim_nccl_events() -> integer: CUDA events the sim's build of nccl.c created so far (its event pool's misses)",
  sim_counter = "lab.cuda.sim_counter(name) -> integer: a count the sim's device keeps: lt_plans, lt_heuristics, lt_matmuls, lt_workspace (cuBLASLt plan cache), synchronize:N, ready:N, launches:N, pointer_queries",
  status = "lab.cuda.status() -> string: why CUDA is or is not available (toolkit, driver, devices)",
}
