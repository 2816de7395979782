/* The control plane across hosts: the per-node board (board.c) is shared memory, seen only by
 * the ranks of one host. When the job spans hosts, one progress thread per host (on the
 * host's lowest rank, its leader) relays over a communicator of its own what the boards carry:
 * rank 0's Ctrl-C, Ctrl-T and watchdog-monitor flags down to every host, a debugger pause
 * raised anywhere to everywhere, every rank's slot (state, collective, site, traceback) to every
 * host's board, and the output of ranks on other hosts to rank 0 while a chunk runs. On one
 * host none of it runs: MPI stays at MPI_THREAD_FUNNELED and the board is as before. */
#ifndef LAB_RUNTIME_DIST_CONTROL_RELAY_H
#define LAB_RUNTIME_DIST_CONTROL_RELAY_H

#include <stdint.h>

/* the MPI thread level to ask for: MULTIPLE when the launcher says the job spans hosts */
int lab_relay_thread_level(void);
/* after MPI_Init_thread: the level MPI gave */
void lab_relay_provided(int level);
/* how many copies of other hosts' slots a board with local slots needs (0: no relay) */
int lab_relay_copies(int local);
/* after the board: the leaders' communicator, host names and clocks, and the thread (collective
 * over the world); 0, or -1 when the job is on one host or has no relay */
int lab_relay_start(void);
void lab_relay_stop(void); /* before MPI_Finalize */
int lab_relay_hosts(void); /* hosts in the job (1 without a relay) */
/* " (host2)" for a rank when the job spans hosts, else "" */
const char *lab_relay_host_label(int world_rank);
/* rank 0: a cleared Ctrl-C goes to every host at the hub's next poll (returns at once), and
 * the wait (up to 2 s) until every host's board has rank 0's flags as of the last flush, which
 * lab_ctl_bcast runs before rank 0's next command, so the next chunk is not interrupted there
 * by a press that ended the last one. The prompt does not wait for the round trip. */
void lab_relay_flush(void);
void lab_relay_settle(void);
/* rank 0: its board changed (a Ctrl-C): the hub sends now, not at its next poll (signal-safe) */
void lab_relay_wake(void);
/* rank 0's live output of ranks on other hosts: a new chunk (its output starts from 0), and
 * the complete lines of rank r past offset `from` (malloc'ed, *len bytes) or NULL */
void lab_relay_live_begin(void);
char *lab_relay_live_take(int world_rank, int64_t from, int64_t *len);

#endif
