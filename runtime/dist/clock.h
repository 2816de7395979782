/* Clocks every part of the runtime reads: a monotonic wall clock (waits, watchdogs, the
 * profiler) and this process's CPU time (what a rank did, apart from the turns it waited
 * for a core when ranks outnumber cores). */
#ifndef LAB_RUNTIME_DIST_CLOCK_H
#define LAB_RUNTIME_DIST_CLOCK_H

/* A monotonic clock in seconds. */
double lab_now(void);
/* CPU time of this process (all its threads), in seconds. */
double lab_cpu_seconds(void);

#endif
