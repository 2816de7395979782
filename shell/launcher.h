/* `llmlab -n N ...` re-runs itself under mpirun with the options a laptop needs. */
#ifndef LAB_SHELL_LAUNCHER_H
#define LAB_SHELL_LAUNCHER_H

/* True when this process was started by mpirun (or another PMI launcher). */
int launched_by_mpi(void);
/* Replaces this process with mpirun -np n <self> <args without -n>. Returns only on failure. */
int launch_under_mpirun(int n, int argc, char **argv, int n_index, int n_args);

#endif
