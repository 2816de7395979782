/* The activity board over MPI shared memory (MPI_Win_allocate_shared on the node). */
#define _GNU_SOURCE
#include "board.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../interrupt.h"
#include "clock.h"
#include "control.h"

typedef struct {
  volatile int state;
  volatile int pid;
  volatile double since;
  volatile int interrupt; /* used in slot 0 only: the node-wide Ctrl-C */
  volatile int pause_epoch; /* slot 0 only: raised by a rank that stops in the debugger */
  volatile int info_epoch;  /* slot 0 only: raised by Ctrl-T: every busy rank writes its trace */
  volatile int monitored;   /* slot 0 only: rank 0 prints the watchdog's report itself */
  volatile int answered;    /* the info epoch this rank's trace answers */
  volatile int out_fd;      /* the file this rank's output goes to during a chunk (its pid's fd), or -1 */
  volatile double shown;    /* the `since` of this rank's wait that rank 0 has shown in a watchdog report */
  volatile int chunk;       /* the chunk this rank runs or last ran */
  volatile int finished;    /* the chunk it has finished (== chunk once done) */
  volatile int failed;      /* it finished that chunk with an error */
  int ngroups;              /* entries of key/posted in use (written by this rank only, while it runs) */
  int overflow;             /* more memberships than entries: no fail fast this chunk */
  unsigned long long key[LAB_BOARD_GROUPS]; /* a group membership (hash of its world ranks) */
  int posted[LAB_BOARD_GROUPS];             /* collectives posted on it this chunk */
  char what[160];
  char site[120];
  char trace[1536];         /* this rank's Lua traceback when it last answered Ctrl-T */
} slot;

static slot *slots; /* slots[local rank] */
static slot fallback;
static int nslots = 1, nlocal = 1, me;
static int *world_of_local; /* world rank of each local slot */
static int *by_rank;        /* slot indices in world-rank order (reports list ranks in order) */

static const char *(*relay_label)(int);
static void (*relay_flush)(void);
static void (*relay_wake)(void);

void lab_board_set_relay(const char *(*host_label)(int), void (*flush)(void), void (*wake)(void)) {
  relay_label = host_label;
  relay_flush = flush;
  relay_wake = wake;
}

int lab_board_init(int copies) {
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return -1;
  MPI_Comm_rank(node, &me);
  MPI_Comm_size(node, &nslots);
  nlocal = nslots;
  nslots += copies; /* slots for the ranks on other hosts */
  MPI_Win win;
  slot *base = NULL;
  MPI_Aint size = me == 0 ? (MPI_Aint)(sizeof(slot) * (size_t)nslots) : 0;
  if (MPI_Win_allocate_shared(size, 1, MPI_INFO_NULL, node, &base, &win) != MPI_SUCCESS) {
    slots = &fallback;
    nslots = nlocal = 1;
    me = 0;
    return -1;
  }
  MPI_Aint got;
  int disp;
  MPI_Win_shared_query(win, 0, &got, &disp, &base);
  slots = base;
  lab_interrupt_attach(&slots[0].interrupt); /* iterators and matmul poll it from below */
  memset(&slots[me], 0, sizeof(slot));
  if (me == 0) memset(&slots[nlocal], 0, sizeof(slot) * (size_t)(nslots - nlocal));
  slots[me].pid = (int)getpid();
  world_of_local = calloc((size_t)nslots, sizeof(int));
  int wr = lab_ctl_rank();
  MPI_Allgather(&wr, 1, MPI_INT, world_of_local, 1, MPI_INT, node);
  for (int r = 0, i = nlocal; i < nslots && r < lab_ctl_size(); r++) { /* copies: the others, in order */
    int here = 0;
    for (int j = 0; j < nlocal; j++) here |= world_of_local[j] == r;
    if (!here) world_of_local[i++] = r;
  }
  by_rank = calloc((size_t)nslots, sizeof(int));
  for (int i = 0, j; by_rank && i < nslots; i++) { /* insertion sort: nslots is the world at most */
    for (j = i; j > 0 && world_of_local[by_rank[j - 1]] > world_of_local[i]; j--) by_rank[j] = by_rank[j - 1];
    by_rank[j] = i;
  }
  MPI_Barrier(node);
  return 0; /* the window lives as long as the process */
}

void lab_board_set(int state, const char *what, const char *site) {
  if (!slots) return;
  slot *s = &slots[me];
  snprintf(s->what, sizeof s->what, "%s", what ? what : "");
  snprintf(s->site, sizeof s->site, "%s", site ? site : "");
  s->since = lab_now();
  __atomic_store_n(&s->state, state, __ATOMIC_RELEASE);
}

char *lab_board_report(void) {
  size_t cap = 256 + (size_t)nslots * 320, len = 0;
  char *out = malloc(cap);
  if (!out || !slots) return out;
  out[0] = 0;
  double now = lab_now();
#define LAB_BOARD_STATE_NAME_(e, name) name,
  static const char *names[LAB_BOARD_NSTATES] = {LAB_BOARD_STATE_LIST(LAB_BOARD_STATE_NAME_)};
#undef LAB_BOARD_STATE_NAME_
  for (int k = 0; k < nslots; k++) {
    int i = by_rank ? by_rank[k] : k;
    slot s = slots[i];
    int st = s.state < 0 || s.state >= LAB_BOARD_NSTATES ? LAB_IDLE : s.state;
    int wr = world_of_local ? world_of_local[i] : i;
    len += (size_t)snprintf(out + len, cap - len, "\n  rank %d%s: %s%s%s%s%s (for %.1f s)", wr, relay_label ? relay_label(wr) : "",
                            names[st], st == LAB_IN_COLLECTIVE ? " " : "", st == LAB_IN_COLLECTIVE ? s.what : "",
                            s.site[0] ? " at " : "", s.site, s.since > 0 ? now - s.since : 0.0);
    if (len >= cap) break;
  }
  return out;
}

void lab_board_request_interrupt(void) {
  if (slots) __atomic_add_fetch(&slots[0].interrupt, 1, __ATOMIC_RELEASE);
  if (relay_wake) relay_wake(); /* other hosts hear it now, not at the relay's next poll */
}

int lab_board_interrupt_requested(void) {
  return slots ? __atomic_load_n(&slots[0].interrupt, __ATOMIC_ACQUIRE) : 0;
}

void lab_board_clear_interrupt(void) {
  if (slots && __atomic_exchange_n(&slots[0].interrupt, 0, __ATOMIC_ACQ_REL) && relay_flush)
    relay_flush(); /* other hosts forget it too (sent now; acknowledged before the next command) */
}

void lab_board_await_cleared(double timeout_s) {
  double end = lab_now() + timeout_s;
  struct timespec nap = {0, 200000}; /* 0.2 ms: the relay's poll is 2 ms */
  while (slots && __atomic_load_n(&slots[0].interrupt, __ATOMIC_ACQUIRE) && lab_now() < end) nanosleep(&nap, NULL);
}

/* ---- live output: where each rank's output goes while a chunk runs ---- */

void lab_board_set_output(int fd) {
  if (slots) __atomic_store_n(&slots[me].out_fd, fd + 1, __ATOMIC_RELEASE); /* 0 (zeroed memory): none */
}

int lab_board_slots(void) { return slots ? nslots : 0; }

int lab_board_output_of(int i, int *world_rank, int *pid) {
  if (!slots || i < 0 || i >= nslots) return -1;
  *world_rank = world_of_local ? world_of_local[i] : i;
  *pid = slots[i].pid;
  return __atomic_load_n(&slots[i].out_fd, __ATOMIC_ACQUIRE) - 1;
}

/* ---- Ctrl-T: every rank's traceback and collective ---- */

void lab_board_request_info(void) {
  if (slots) __atomic_add_fetch(&slots[0].info_epoch, 1, __ATOMIC_ACQ_REL);
}

int lab_board_info_pending(void) {
  return slots && __atomic_load_n(&slots[0].info_epoch, __ATOMIC_ACQUIRE) != slots[me].answered;
}

void lab_board_answer_info(const char *trace) {
  if (!slots) return;
  slot *s = &slots[me];
  snprintf(s->trace, sizeof s->trace, "%s", trace ? trace : "");
  __atomic_store_n(&s->answered, __atomic_load_n(&slots[0].info_epoch, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

int lab_board_info_answered(void) {
  if (!slots) return 1;
  int epoch = __atomic_load_n(&slots[0].info_epoch, __ATOMIC_ACQUIRE);
  for (int i = 0; i < nslots; i++) {
    slot *s = &slots[i];
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != LAB_IDLE && __atomic_load_n(&s->answered, __ATOMIC_ACQUIRE) != epoch)
      return 0;
  }
  return 1;
}

char *lab_board_info_report(void) {
  char *head = lab_board_report();
  if (!head || !slots) return head;
  int epoch = __atomic_load_n(&slots[0].info_epoch, __ATOMIC_ACQUIRE);
  size_t cap = strlen(head) + (size_t)nslots * (sizeof fallback.trace + 64) + 1, len = strlen(head);
  char *out = realloc(head, cap);
  if (!out) return head;
  for (int k = 0; k < nslots; k++) {
    int i = by_rank ? by_rank[k] : k;
    slot *s = &slots[i];
    if (s->state == LAB_IDLE || s->answered != epoch || !s->trace[0]) continue;
    len += (size_t)snprintf(out + len, cap - len, "\n  rank %d %s", world_of_local ? world_of_local[i] : i, s->trace);
    if (len >= cap) break;
  }
  return out;
}

/* ---- the watchdog's one report, composed where the board is read at one moment ---- */

void lab_board_set_monitored(int on) {
  if (slots) __atomic_store_n(&slots[0].monitored, on, __ATOMIC_RELEASE);
}
int lab_board_monitored(void) { return slots ? __atomic_load_n(&slots[0].monitored, __ATOMIC_ACQUIRE) : 0; }

static double *covered; /* the `since` of each slot's wait the last report covered (rank 0) */

char *lab_board_stalled(double seconds) {
  if (!slots || seconds <= 0) return NULL;
  if (!covered) covered = calloc((size_t)nslots, sizeof *covered);
  if (!covered) return NULL;
  double now = lab_now();
  int stalled = -1;
  for (int i = 0; i < nslots && stalled < 0; i++) {
    slot *s = &slots[i];
    if (s->state == LAB_IN_COLLECTIVE && now - s->since > seconds && s->since != covered[i]) stalled = i;
  }
  if (stalled < 0) return NULL;
  for (int i = 0; i < nslots; i++) /* one report per stall: every wait now seen is covered */
    if (slots[i].state == LAB_IN_COLLECTIVE) covered[i] = slots[i].since;
  char *board = lab_board_report();
  char *out = NULL;
  slot *s = &slots[stalled];
  if (asprintf(&out, "watchdog: rank %d has waited %.1f s in %s at %s; a rank never arrived. What every rank is doing:%s",
               world_of_local ? world_of_local[stalled] : stalled, now - s->since, s->what, s->site[0] ? s->site : "?",
               board ? board : "") < 0)
    out = NULL;
  free(board);
  return out;
}

void lab_board_stall_shown(void) {
  if (!slots || !covered) return;
  for (int i = 0; i < nslots; i++) __atomic_store(&slots[i].shown, &covered[i], __ATOMIC_RELEASE);
}

int lab_board_in_wait(void) {
  return slots && __atomic_load_n(&slots[me].state, __ATOMIC_ACQUIRE) == LAB_IN_COLLECTIVE;
}

int lab_board_wait_shown(void) {
  if (!slots) return 0;
  slot *s = &slots[me];
  double shown;
  __atomic_load(&s->shown, &shown, __ATOMIC_ACQUIRE);
  return __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == LAB_IN_COLLECTIVE && shown == s->since;
}


static lab_pause_fn pause_fn;
static int served_epoch; /* written by the stepper, read by the Ctrl-C watcher too */

int lab_board_pause_epoch(void) { return slots ? __atomic_load_n(&slots[0].pause_epoch, __ATOMIC_ACQUIRE) : 0; }
void lab_board_raise_pause(void) {
  if (slots) __atomic_add_fetch(&slots[0].pause_epoch, 1, __ATOMIC_ACQ_REL);
}

void lab_board_set_pause_handler(lab_pause_fn fn) { pause_fn = fn; }
/* The served epoch is agreed in a collective, which can outrun the relay that carries the other
 * hosts' raises to this host's board: the board is brought up to it, so that the next raise here
 * is past it (one added to a board still behind would be counted as served, and the pause lost:
 * a rank stopped at a breakpoint while the others waited for it in a collective until the
 * watchdog). */
void lab_board_set_served(int epoch) {
  __atomic_store_n(&served_epoch, epoch, __ATOMIC_RELEASE);
  if (slots) lab_board_pause_to(epoch);
}
int lab_board_served(void) { return __atomic_load_n(&served_epoch, __ATOMIC_ACQUIRE); }
int lab_board_pause_pending(void) { return pause_fn && lab_board_pause_epoch() > lab_board_served(); }
int lab_board_pause_now(const char *where) { return pause_fn ? pause_fn(where) : 0; }

/* ---- the relay's access to the slots (board.h, "across hosts") ---- */

int lab_board_local_slots(void) { return slots ? nlocal : 0; }

void lab_board_view_get(int i, lab_board_view *v) {
  slot *s = &slots[i];
  v->world_rank = world_of_local ? world_of_local[i] : i;
  v->pid = s->pid;
  v->state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
  v->answered = s->answered;
  v->out_fd = s->out_fd - 1;
  v->since = s->since;
  v->shown = s->shown;
  memcpy(v->what, s->what, sizeof v->what);
  memcpy(v->site, s->site, sizeof v->site);
  memcpy(v->trace, s->trace, sizeof v->trace);
  v->what[sizeof v->what - 1] = v->site[sizeof v->site - 1] = v->trace[sizeof v->trace - 1] = 0;
  /* finished first: once it equals chunk the counts are final (end_chunk stores it last, and
   * the next chunk cannot begin while any rank still waits in this one) */
  memset(&v->run, 0, sizeof v->run);
  v->run.finished = __atomic_load_n(&s->finished, __ATOMIC_ACQUIRE);
  v->run.chunk = __atomic_load_n(&s->chunk, __ATOMIC_ACQUIRE);
  if (v->run.finished == v->run.chunk) {
    v->run.failed = s->failed;
    v->run.overflow = s->overflow;
    v->run.ngroups = s->ngroups < LAB_BOARD_GROUPS ? s->ngroups : LAB_BOARD_GROUPS;
    memcpy(v->run.key, s->key, sizeof(unsigned long long) * (size_t)v->run.ngroups);
    memcpy(v->run.posted, s->posted, sizeof(int) * (size_t)v->run.ngroups);
  }
}

void lab_board_view_put(int i, const lab_board_view *v) {
  if (!slots || i < nlocal || i >= nslots) return;
  slot *s = &slots[i];
  snprintf(s->what, sizeof s->what, "%s", v->what);
  snprintf(s->site, sizeof s->site, "%s", v->site);
  snprintf(s->trace, sizeof s->trace, "%s", v->trace);
  s->since = v->since;
  s->pid = 0;
  s->out_fd = 0;
  __atomic_store_n(&s->answered, v->answered, __ATOMIC_RELEASE);
  __atomic_store_n(&s->state, v->state, __ATOMIC_RELEASE);
  /* the counts before finished, as the rank itself stores them (missing_member reads finished first) */
  int n = v->run.ngroups < 0 ? 0 : v->run.ngroups > LAB_BOARD_GROUPS ? LAB_BOARD_GROUPS : v->run.ngroups;
  s->failed = v->run.failed;
  s->overflow = v->run.overflow;
  memcpy(s->key, v->run.key, sizeof(unsigned long long) * (size_t)n);
  memcpy(s->posted, v->run.posted, sizeof(int) * (size_t)n);
  s->ngroups = n;
  __atomic_store_n(&s->chunk, v->run.chunk, __ATOMIC_RELEASE);
  __atomic_store_n(&s->finished, v->run.finished, __ATOMIC_RELEASE);
}

void lab_board_shown_put(int i, double shown) {
  if (slots && i >= 0 && i < nslots) __atomic_store(&slots[i].shown, &shown, __ATOMIC_RELEASE);
}

void lab_board_flags_get(lab_board_flags *f) {
  f->interrupt = __atomic_load_n(&slots[0].interrupt, __ATOMIC_ACQUIRE);
  f->pause_epoch = __atomic_load_n(&slots[0].pause_epoch, __ATOMIC_ACQUIRE);
  f->info_epoch = __atomic_load_n(&slots[0].info_epoch, __ATOMIC_ACQUIRE);
  f->monitored = __atomic_load_n(&slots[0].monitored, __ATOMIC_ACQUIRE);
}

void lab_board_flags_put(const lab_board_flags *f) {
  __atomic_store_n(&slots[0].interrupt, f->interrupt, __ATOMIC_RELEASE);
  __atomic_store_n(&slots[0].info_epoch, f->info_epoch, __ATOMIC_RELEASE);
  __atomic_store_n(&slots[0].monitored, f->monitored, __ATOMIC_RELEASE);
  lab_board_pause_to(f->pause_epoch);
}

void lab_board_pause_to(int epoch) {
  int e = __atomic_load_n(&slots[0].pause_epoch, __ATOMIC_ACQUIRE);
  while (epoch > e && !__atomic_compare_exchange_n(&slots[0].pause_epoch, &e, epoch, 0, __ATOMIC_ACQ_REL,
                                                            __ATOMIC_ACQUIRE)) {
  }
}

/* ---- fail fast: who finished a chunk without posting a collective ---- */

static int chunk_serial, gave_up;

void lab_board_begin_chunk(void) {
  gave_up = 0;
  if (!slots) return;
  slot *s = &slots[me];
  s->ngroups = 0;
  s->overflow = 0;
  s->failed = 0;
  __atomic_store_n(&s->chunk, ++chunk_serial, __ATOMIC_RELEASE);
}

void lab_board_end_chunk(int failed) {
  if (!slots) return;
  slot *s = &slots[me];
  s->failed = failed;
  __atomic_store_n(&s->finished, s->chunk, __ATOMIC_RELEASE); /* after the counts and failed */
}

static unsigned long long membership(const int *world_ranks, int n) {
  unsigned long long h = 1469598103934665603ull; /* FNV-1a over the member list */
  for (int i = 0; i < n; i++) {
    h ^= (unsigned)world_ranks[i];
    h *= 1099511628211ull;
  }
  return h ^ (unsigned long long)n;
}

static int *posted_on(slot *s, unsigned long long key) {
  for (int i = 0; i < s->ngroups; i++)
    if (s->key[i] == key) return &s->posted[i];
  return NULL;
}

void lab_board_count_collective(const int *world_ranks, int n) {
  if (!slots) return;
  slot *s = &slots[me];
  unsigned long long key = membership(world_ranks, n);
  int *p = posted_on(s, key);
  if (p) {
    (*p)++;
  } else if (s->ngroups < LAB_BOARD_GROUPS) {
    s->key[s->ngroups] = key;
    s->posted[s->ngroups] = 1;
    s->ngroups++;
  } else {
    s->overflow = 1;
  }
}

int lab_board_missing_member(const int *world_ranks, int n, int *failed) {
  if (!slots || !world_of_local) return -1;
  slot *mine = &slots[me];
  unsigned long long key = membership(world_ranks, n);
  int *my_posted = posted_on(mine, key);
  /* outside any chunk (before the first, or this rank's is over: recovery's own collectives) */
  if (mine->chunk == 0 || mine->finished == mine->chunk || !my_posted || mine->overflow) return -1;
  for (int i = 0; i < nslots; i++) { /* this node's ranks, and the relay's copies of the other hosts' */
    if (i == me) continue;
    int member = 0;
    for (int k = 0; k < n && !member; k++) member = world_ranks[k] == world_of_local[i];
    if (!member) continue;
    slot *s = &slots[i];
    /* a rank that has finished this very chunk no longer writes its slot */
    if (__atomic_load_n(&s->finished, __ATOMIC_ACQUIRE) != mine->chunk || s->chunk != mine->chunk || s->overflow) continue;
    int *p = posted_on(s, key);
    if ((p ? *p : 0) < *my_posted) {
      *failed = s->failed;
      return world_of_local[i];
    }
  }
  return -1;
}

#define SENDER_GRACE_S 0.5 /* a message sent just before its sender finished is still on its way */

static int sender = -1;
static double sender_done_seen; /* when this rank first saw the sender finished, 0: not yet */

void lab_board_expect_sender(int world_rank) {
  sender = world_rank;
  sender_done_seen = 0;
}

int lab_board_sender_gone(int *failed) {
  if (!slots || !world_of_local || sender < 0) return -1;
  slot *mine = &slots[me];
  if (mine->chunk == 0 || mine->finished == mine->chunk) return -1;
  for (int i = 0; i < nslots; i++) {
    if (world_of_local[i] != sender || i == me) continue;
    slot *s = &slots[i];
    if (__atomic_load_n(&s->finished, __ATOMIC_ACQUIRE) != mine->chunk || s->chunk != mine->chunk) return -1;
    double now = lab_now();
    if (sender_done_seen == 0) sender_done_seen = now;
    if (now - sender_done_seen < SENDER_GRACE_S) return -1;
    *failed = s->failed;
    return sender;
  }
  return -1;
}

int lab_board_gave_up_for_member(void) { return gave_up; }
void lab_board_note_gave_up(void) { gave_up = 1; }
