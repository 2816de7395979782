/* The activity board: a small shared-memory table (one slot per rank on this node, and a copy
 * of every other rank's slot kept by control_relay.c when the job spans hosts) where
 * every rank writes what it is doing (running Lua at a line, inside which collective,
 * since when) without any message passing, and where Ctrl-C and the debugger raise flags
 * every rank sees at once. A rank stuck waiting in a collective reads the other slots to
 * report who never arrived; a rank spinning in a Lua loop sees the interrupt flag from its
 * instruction-count hook. Plain loads and stores on shared memory: no MPI progress needed. */
#ifndef LAB_RUNTIME_DIST_BOARD_H
#define LAB_RUNTIME_DIST_BOARD_H

#include <stddef.h>

/* X(enum suffix, name): a slot's state and how the watchdog's report words it ("rank 1: in
 * all_reduce at ..."); the enum and lab_board_report's names come from this list. */
#define LAB_BOARD_STATE_LIST(X) X(IDLE, "idle") X(RUNNING, "running Lua") X(IN_COLLECTIVE, "in") X(PAUSED, "paused")

#define LAB_BOARD_STATE_ENUM_(e, name) LAB_##e,
enum { LAB_BOARD_STATE_LIST(LAB_BOARD_STATE_ENUM_) LAB_BOARD_NSTATES };
#undef LAB_BOARD_STATE_ENUM_

/* set up over the ranks of this node (collective over them), with room for `copies` slots of
 * ranks on other hosts (the relay's count: control_relay.h); 0 or -1 */
int lab_board_init(int copies);
/* the relay's part, which world set-up plugs in (the board lies below the relay that copies its
 * slots): a rank's host label in reports (" (host2)"), the send of a cleared Ctrl-C to the
 * other hosts (it does not wait: lab_ctl_bcast waits before rank 0's next command), and the
 * wake-up of the relay on a press (async-signal-safe). NULL: one host. */
void lab_board_set_relay(const char *(*host_label)(int world_rank), void (*flush)(void), void (*wake)(void));
void lab_board_set(int state, const char *what, const char *site);
/* "rank 1: in all_reduce(4 x f32) at stdin:1 for 31.0 s" lines for every rank (malloc'ed) */
char *lab_board_report(void);

/* Ctrl-C: each request counts one press; requested is the count since the last clear (0:
 * none), so a rank can tell a second press from the first. */
void lab_board_request_interrupt(void);
int lab_board_interrupt_requested(void);
void lab_board_clear_interrupt(void);
/* a rank other than 0, after the chunk's recovery (rank 0 has cleared the Ctrl-C by then):
 * waits, up to timeout_s, until this host's board has forgotten it too (on another host the
 * relay brings the cleared flag a poll or two later), so the Lua this rank runs before the next
 * command is not interrupted by the press that ended the chunk */
void lab_board_await_cleared(double timeout_s);

/* The debugger's pause: a rank that stops raises the epoch; every other rank stops at its
 * next line, or, if it is waiting in a collective, from inside the wait (the handler runs
 * the debugger's exchange there). served is the epoch this rank has already answered. */
/* returns nonzero when the wait must be given up (the stepper quit) */
typedef int (*lab_pause_fn)(const char *where);
int lab_board_pause_epoch(void);
void lab_board_raise_pause(void);
void lab_board_set_pause_handler(lab_pause_fn fn); /* NULL: no debugger */
void lab_board_set_served(int epoch);
int lab_board_served(void);
int lab_board_pause_pending(void);
int lab_board_pause_now(const char *where);

/* Live output: a rank running a chunk publishes the descriptor its output is captured in (-1
 * when done), so rank 0 can read it through /proc/<pid>/fd while the chunk runs. */
void lab_board_set_output(int fd);
int lab_board_slots(void);
/* slot i's world rank, pid and output descriptor (or -1) */
int lab_board_output_of(int i, int *world_rank, int *pid);

/* Ctrl-T (as BSD's SIGINFO): rank 0 raises the info epoch; every busy rank writes its Lua
 * traceback (from its hook, or the call's traceback from inside a collective wait) into its
 * slot; rank 0 prints the board with them. Idle ranks need not answer. */
void lab_board_request_info(void);
int lab_board_info_pending(void);
void lab_board_answer_info(const char *trace);
int lab_board_info_answered(void); /* every busy rank has answered the latest request */
char *lab_board_info_report(void);  /* malloc'ed */

/* The watchdog's one report: rank 0 (monitored = 1) reads the board at one moment and prints
 * it while the chunk still runs; waits that give up then name only themselves. stalled returns
 * the report (malloc'ed) the first time a rank has waited longer than seconds in one collective,
 * else NULL; once it is printed, stall_shown tells the waits it covered (each rank's
 * wait_shown), which give up only then: under load rank 0's watcher may print late, and a wait
 * that gave up first was missing from the report (or there was none) while its error pointed
 * at "the report above". */
void lab_board_set_monitored(int on);
int lab_board_monitored(void);
char *lab_board_stalled(double seconds);
void lab_board_stall_shown(void);
int lab_board_wait_shown(void); /* this rank's current wait was in a printed report */
int lab_board_in_wait(void);    /* this rank's slot shows it in a collective (what rank 0 reports) */

/* ---- across hosts (control_relay.c): the board of the node that holds rank 0, and of
 * every other node, has a slot for every rank of the job; the slots of ranks on other hosts are
 * copies the relay keeps up to date over MPI, so everything above reads them as local ones.
 * Copies have no pid and no output descriptor (their output comes through the relay). ---- */
#define LAB_BOARD_GROUPS 16 /* group memberships counted per chunk (fail fast, below) */
/* a rank's chunk as fail fast reads it: the counts only once it has finished (finished == chunk) */
typedef struct {
  int chunk, finished, failed, overflow, ngroups;
  unsigned long long key[LAB_BOARD_GROUPS];
  int posted[LAB_BOARD_GROUPS];
} lab_board_run;
typedef struct {
  int world_rank, pid, state, answered, out_fd;
  double since, shown;
  char what[160], site[120], trace[1536];
  lab_board_run run;
} lab_board_view;
typedef struct {
  int interrupt, pause_epoch, info_epoch, monitored;
} lab_board_flags;
int lab_board_local_slots(void); /* slots [0, local) are this node's ranks, the rest copies */
void lab_board_view_get(int i, lab_board_view *v);
void lab_board_view_put(int i, const lab_board_view *v); /* a copy's state, since, what, site, trace, run */
void lab_board_shown_put(int i, double shown);           /* rank 0's report covered this wait */
void lab_board_flags_get(lab_board_flags *f);
void lab_board_flags_put(const lab_board_flags *f); /* pause_epoch only rises */
void lab_board_pause_to(int epoch);                 /* raises the pause epoch to epoch */

/* Fail fast: a collective cannot complete once a member has finished its chunk (a REPL chunk,
 * a :run or :step script, a checked script) without posting it, so the ranks waiting in it give
 * up at once instead of at the watchdog, which is left for members that still run. Every rank
 * counts the collectives it posts per group membership during a chunk (count_collective, from
 * dist.c); a waiter compares its count with that of each member that finished the same chunk
 * (missing_member): on this node from its slot, on other hosts from the copy the relay keeps.
 * Chunks are numbered by each rank in step: every rank takes part in every chunk, targeted or
 * not. */
void lab_board_begin_chunk(void);
void lab_board_end_chunk(int failed);
void lab_board_count_collective(const int *world_ranks, int n);
/* the world rank of a member of the group that finished this chunk without posting the
 * collective this rank now waits in (*failed: it ended with an error), else -1 */
int lab_board_missing_member(const int *world_ranks, int n, int *failed);
/* A blocking receive names its sender (world rank; -1 when done): once the sender has finished
 * this chunk and the message has not come within a grace (one sent just before the end still
 * arrives), the receive gives up at once, as a collective does; returns the sender then, else -1
 * (*failed: it ended with an error). */
void lab_board_expect_sender(int world_rank);
int lab_board_sender_gone(int *failed);
/* whether this rank gave up a wait for a missing member since the chunk began (its error
 * follows from another rank's, which the REPL shows first) */
int lab_board_gave_up_for_member(void);
void lab_board_note_gave_up(void);

#endif
