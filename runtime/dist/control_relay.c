/* The relay of control_relay.h: one thread per host, on the host's leader (its lowest rank),
 * talking over a communicator of leaders. Rank 0's leader is the hub: every other leader sends
 * it "up" messages (its host's changed slots in its own clock, its pause epoch, the output of its
 * ranks while a chunk runs, the last flush it applied); the hub sends each leader "down" messages
 * (rank 0's flags, the slots of the other hosts in the hub's clock, which of the leader's waits
 * rank 0's watchdog report showed). Clocks: CLOCK_MONOTONIC differs between machines, so a
 * slot's `since` travels converted by offsets measured once at start (a barrier, then every
 * rank's clock), and a wait's identity (`since` as rank 0's report recorded it) goes back in the
 * owner's own clock. Each leader polls every POLL_NS; the hub wakes at once on a Ctrl-C or its
 * clear, so a press reaches another host within that host's next poll. */
#define _GNU_SOURCE
#include "control_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "board.h"
#include "clock.h"
#include "place.h"

#define POLL_NS 2000000L /* 2 ms between polls: a Ctrl-C crosses hosts in ~4 ms, the cleared flag
                          * is acknowledged within ~4 ms (rank 0 waits for it before its next
                          * command, not before its prompt); 500 wake-ups a second of a thread
                          * that only a job across hosts runs (5 ms: the prompt after a Ctrl-C
                          * of every rank was 2.1x one host's, 32 against 15 ms) */
#define MSG_MAX (1 << 20)  /* one message's bytes */
#define OUT_BUDGET (1 << 16) /* output bytes per up message */
#define LIVE_MAX (8 << 20) /* rank 0 keeps at most this much of a remote rank's chunk output */
enum { TAG_UP = 1, TAG_DOWN = 2 };

static int level_given, world, me, running;
static MPI_Comm leaders = MPI_COMM_NULL;
static int lrank, lsize;
static int *host_of;      /* per world rank: its leader's rank in `leaders` */
static char (*hosts)[64]; /* per world rank: its host name */
static char *labels;      /* per world rank: " (host)" */
static double *clock_off; /* per world rank: its clock minus rank 0's */
static int *slot_of;      /* per world rank: its slot on this host's board */
static int *lead_of;      /* per host: its leader's world rank */
static pthread_t thread;
static volatile int stop_flag;
static volatile int flush_seq; /* hub: raised by lab_relay_flush */
static int *acked;             /* hub: per leader, the flush it has applied */
static int wake_pipe[2] = {-1, -1}; /* hub: its nap, cut short by a Ctrl-C or its clear */

/* ---- packing ---- */

typedef struct {
  char *p;
  size_t len, cap;
} wbuf;
typedef struct {
  const char *p;
  size_t len, at;
} rbuf;

static void put(wbuf *w, const void *v, size_t n) {
  if (w->len + n > w->cap) return; /* callers keep below MSG_MAX */
  memcpy(w->p + w->len, v, n);
  w->len += n;
}
static void put_i(wbuf *w, int v) { put(w, &v, sizeof v); }
static void put_d(wbuf *w, double v) { put(w, &v, sizeof v); }
static void put_s(wbuf *w, const char *s) {
  int n = (int)strlen(s);
  put_i(w, n);
  put(w, s, (size_t)n);
}
static int get(rbuf *r, void *v, size_t n) {
  if (r->at + n > r->len) return -1;
  memcpy(v, r->p + r->at, n);
  r->at += n;
  return 0;
}
static int get_i(rbuf *r) {
  int v = 0;
  get(r, &v, sizeof v);
  return v;
}
static double get_d(rbuf *r) {
  double v = 0;
  get(r, &v, sizeof v);
  return v;
}
static void get_s(rbuf *r, char *s, size_t cap) {
  int n = get_i(r);
  if (n < 0 || r->at + (size_t)n > r->len) n = 0;
  size_t k = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
  memcpy(s, r->p + r->at, k);
  s[k] = 0;
  r->at += (size_t)n;
}
static void put_view(wbuf *w, const lab_board_view *v, double since) {
  put_i(w, v->world_rank);
  put_i(w, v->state);
  put_i(w, v->answered);
  put_d(w, since);
  put_s(w, v->what);
  put_s(w, v->site);
  put_s(w, v->trace);
  put(w, &v->run, sizeof v->run); /* fail fast on the other hosts (board.h) */
}
static void get_view(rbuf *r, lab_board_view *v) {
  memset(v, 0, sizeof *v);
  v->world_rank = get_i(r);
  v->state = get_i(r);
  v->answered = get_i(r);
  v->since = get_d(r);
  get_s(r, v->what, sizeof v->what);
  get_s(r, v->site, sizeof v->site);
  get_s(r, v->trace, sizeof v->trace);
  get(r, &v->run, sizeof v->run);
}
static int same_run(const lab_board_run *a, const lab_board_run *b) {
  return a->chunk == b->chunk && a->finished == b->finished && a->failed == b->failed && a->overflow == b->overflow &&
         a->ngroups == b->ngroups && !memcmp(a->key, b->key, sizeof a->key) && !memcmp(a->posted, b->posted, sizeof a->posted);
}
static int same_view(const lab_board_view *a, const lab_board_view *b) {
  return a->state == b->state && a->answered == b->answered && a->since == b->since && !strcmp(a->what, b->what) &&
         !strcmp(a->site, b->site) && !strcmp(a->trace, b->trace) && same_run(&a->run, &b->run);
}

/* ---- set-up ---- */

int lab_relay_thread_level(void) {
  const char *ws = getenv("OMPI_COMM_WORLD_SIZE"), *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (ws && ls) return atoi(ws) == atoi(ls) ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE;
  return getenv("PMI_RANK") || getenv("PMIX_RANK") ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
}

void lab_relay_provided(int level) { level_given = level; }

int lab_relay_copies(int local) {
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  return local < world && level_given >= MPI_THREAD_MULTIPLE ? world - local : 0;
}

int lab_relay_hosts(void) { return running ? lsize : 1; }

const char *lab_relay_host_label(int r) { return running && r >= 0 && r < world ? labels + (size_t)r * 72 : ""; }

static void *relay_main(void *arg);

int lab_relay_start(void) {
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int local = lab_board_local_slots();
  int spans = local > 0 && local < world, any = 0;
  MPI_Allreduce(&spans, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!any) return -1;
  if (level_given < MPI_THREAD_MULTIPLE) {
    if (me == 0)
      fprintf(stderr, "llmlab: this MPI gives no MPI_THREAD_MULTIPLE: Ctrl-C, Ctrl-T, the debugger's pauses, watchdog "
                      "reports and live output reach only the ranks on rank 0's host\n");
    return -1;
  }
  int leader = lab_ctl_local_rank() == 0;
  MPI_Comm_split(MPI_COMM_WORLD, leader ? 0 : MPI_UNDEFINED, me, &leaders);
  if (leader) {
    MPI_Comm_rank(leaders, &lrank);
    MPI_Comm_size(leaders, &lsize);
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
  int mine[2] = {lrank, lsize};
  MPI_Bcast(mine, 2, MPI_INT, 0, node); /* the node's local rank 0 is its leader */
  MPI_Comm_free(&node);
  lsize = mine[1];
  host_of = calloc((size_t)world, sizeof *host_of);
  hosts = calloc((size_t)world, sizeof *hosts);
  labels = calloc((size_t)world, 72);
  clock_off = calloc((size_t)world, sizeof *clock_off);
  slot_of = calloc((size_t)world, sizeof *slot_of);
  acked = calloc((size_t)lsize, sizeof *acked);
  lead_of = calloc((size_t)lsize, sizeof *lead_of);
  if (!lead_of || !host_of || !hosts || !labels || !clock_off || !slot_of || !acked) return -1;
  MPI_Allgather(&mine[0], 1, MPI_INT, host_of, 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = world - 1; r >= 0; r--) lead_of[host_of[r]] = r;
  char name[64];
  snprintf(name, sizeof name, "%s", lab_ctl_host());
  MPI_Allgather(name, 64, MPI_CHAR, hosts, 64, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < world; r++) snprintf(labels + (size_t)r * 72, 72, " (%.63s)", hosts[r]);
  MPI_Barrier(MPI_COMM_WORLD);
  double t = lab_now();
  MPI_Allgather(&t, 1, MPI_DOUBLE, clock_off, 1, MPI_DOUBLE, MPI_COMM_WORLD);
  for (int r = world - 1; r >= 0; r--) clock_off[r] -= clock_off[0];
  lab_board_view v;
  for (int i = 0; i < world; i++) {
    lab_board_view_get(i, &v);
    if (v.world_rank >= 0 && v.world_rank < world) slot_of[v.world_rank] = i;
  }
  if (me == 0 && lsize > 1 && pipe2(wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0) wake_pipe[0] = wake_pipe[1] = -1;
  running = 1;
  if (leader && pthread_create(&thread, NULL, relay_main, NULL) != 0) {
    fprintf(stderr, "llmlab: rank %d: cannot start the control relay thread\n", me);
    return -1;
  }
  return 0;
}

void lab_relay_stop(void) {
  if (!running || leaders == MPI_COMM_NULL) return;
  stop_flag = 1;
  pthread_join(thread, NULL);
  leaders = MPI_COMM_NULL; /* freed by MPI_Finalize */
}

/* ---- rank 0's flush and live output ---- */

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int live_epoch;
static char **live_buf;
static int64_t *live_len;

void lab_relay_wake(void) { /* async-signal-safe: the SIGINT handler calls it through the board */
  if (running && me == 0 && wake_pipe[1] >= 0 && write(wake_pipe[1], "w", 1) < 0) {
  }
}

void lab_relay_flush(void) {
  if (!running || me != 0 || lsize < 2) return;
  __atomic_add_fetch(&flush_seq, 1, __ATOMIC_ACQ_REL);
  lab_relay_wake();
}

void lab_relay_settle(void) {
  static int settled; /* the last flush waited for: a host that never acks costs 2 s once, not per command */
  if (!running || me != 0 || lsize < 2) return;
  int seq = __atomic_load_n(&flush_seq, __ATOMIC_ACQUIRE);
  if (seq == settled) return;
  settled = seq;
  double end = lab_now() + 2.0;
  struct timespec nap = {0, 200000};
  for (;;) {
    int all = 1;
    for (int d = 1; d < lsize; d++) all &= __atomic_load_n(&acked[d], __ATOMIC_ACQUIRE) >= seq;
    if (all || lab_now() > end) return;
    nanosleep(&nap, NULL);
  }
}

/* the hub's nap between polls: POLL_NS, or until rank 0's board changes (a press, a clear) */
static void hub_nap(void) {
  struct pollfd p = {.fd = wake_pipe[0], .events = POLLIN};
  if (poll(&p, 1, (int)(POLL_NS / 1000000L)) > 0) {
    char sink[64];
    if (read(wake_pipe[0], sink, sizeof sink) < 0) {
    }
  }
}

void lab_relay_live_begin(void) {
  if (!running || me != 0) return;
  pthread_mutex_lock(&live_lock);
  if (!live_buf) {
    live_buf = calloc((size_t)world, sizeof *live_buf);
    live_len = calloc((size_t)world, sizeof *live_len);
  }
  for (int r = 0; live_len && r < world; r++) live_len[r] = 0;
  __atomic_add_fetch(&live_epoch, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&live_lock);
}

char *lab_relay_live_take(int r, int64_t from, int64_t *len) {
  if (!running || me != 0 || !live_buf || r < 0 || r >= world) return NULL;
  char *out = NULL;
  pthread_mutex_lock(&live_lock);
  if (live_len[r] > from && (out = malloc((size_t)(live_len[r] - from))) != NULL) {
    *len = live_len[r] - from;
    memcpy(out, live_buf[r] + from, (size_t)*len);
  }
  pthread_mutex_unlock(&live_lock);
  return out;
}

static void live_append(int r, int epoch, int64_t offset, const char *bytes, int n) {
  pthread_mutex_lock(&live_lock);
  if (live_buf && epoch == live_epoch && offset == live_len[r] && live_len[r] + n <= LIVE_MAX) {
    char *b = realloc(live_buf[r], (size_t)(live_len[r] + n));
    if (b) {
      memcpy(b + live_len[r], bytes, (size_t)n);
      live_buf[r] = b;
      live_len[r] += n;
    }
  }
  pthread_mutex_unlock(&live_lock);
}

/* ---- the hub (rank 0's leader) ---- */

typedef struct {
  char *buf;
  MPI_Request req;
  lab_board_flags flags;
  int seq, epoch;
  int *version;   /* per world rank: the slot version last sent */
  double *shown;  /* per world rank on that host: the shown last sent */
} peer;

static void hub(void) {
  int local = lab_board_local_slots();
  int *version = calloc((size_t)world, sizeof *version);
  double *raw_since = calloc((size_t)world, sizeof *raw_since), *adj_since = calloc((size_t)world, sizeof *adj_since);
  lab_board_view *cache = calloc((size_t)local, sizeof *cache);
  peer *peers = calloc((size_t)lsize, sizeof *peers);
  char *in = malloc(MSG_MAX);
  lab_board_view *v = malloc(sizeof *v);
  if (!version || !raw_since || !adj_since || !cache || !peers || !in || !v) return;
  for (int d = 1; d < lsize; d++) {
    peers[d].buf = malloc(MSG_MAX);
    peers[d].req = MPI_REQUEST_NULL;
    peers[d].version = calloc((size_t)world, sizeof(int));
    peers[d].shown = calloc((size_t)world, sizeof(double));
    peers[d].flags.interrupt = -1; /* send the first time */
    if (!peers[d].buf || !peers[d].version || !peers[d].shown) return;
  }
  MPI_Request up = MPI_REQUEST_NULL;
  MPI_Irecv(in, MSG_MAX, MPI_BYTE, MPI_ANY_SOURCE, TAG_UP, leaders, &up);
  while (!stop_flag) {
    int got = 0;
    MPI_Status st;
    while (MPI_Test(&up, &got, &st) == MPI_SUCCESS && got) { /* every leader's news */
      int n = 0, d = st.MPI_SOURCE;
      MPI_Get_count(&st, MPI_BYTE, &n);
      rbuf r = {in, (size_t)n, 0};
      lab_board_pause_to(get_i(&r));
      __atomic_store_n(&acked[d], get_i(&r), __ATOMIC_RELEASE);
      for (int k = get_i(&r); k > 0; k--) {
        get_view(&r, v);
        int w = v->world_rank;
        if (w < 0 || w >= world) break;
        raw_since[w] = v->since;
        adj_since[w] = v->since == 0 ? 0 : v->since - clock_off[w]; /* 0: never set, on any clock */
        v->since = adj_since[w];
        lab_board_view_put(slot_of[w], v);
        version[w]++;
      }
      for (int k = get_i(&r); k > 0; k--) {
        int w = get_i(&r), epoch = get_i(&r), len = get_i(&r);
        double off = get_d(&r);
        if (w < 0 || w >= world || len < 0 || r.at + (size_t)len > r.len) break;
        live_append(w, epoch, (int64_t)off, r.p + r.at, len);
        r.at += (size_t)len;
      }
      MPI_Irecv(in, MSG_MAX, MPI_BYTE, MPI_ANY_SOURCE, TAG_UP, leaders, &up);
    }
    for (int i = 0; i < local; i++) { /* this host's slots that changed */
      lab_board_view_get(i, v);
      if (!same_view(v, &cache[i])) {
        cache[i] = *v;
        version[v->world_rank]++;
      }
    }
    /* the flush count before the flags: a clear precedes its flush, so flags read after a
     * count carry every clear that count covers, and the ack of a count means cleared there */
    int seq = __atomic_load_n(&flush_seq, __ATOMIC_ACQUIRE), epoch = __atomic_load_n(&live_epoch, __ATOMIC_ACQUIRE);
    lab_board_flags f;
    lab_board_flags_get(&f);
    for (int d = 1; d < lsize; d++) {
      peer *p = &peers[d];
      int done = 1;
      if (p->req != MPI_REQUEST_NULL) MPI_Test(&p->req, &done, MPI_STATUS_IGNORE);
      if (!done) continue;
      int news = memcmp(&f, &p->flags, sizeof f) || seq != p->seq || epoch != p->epoch;
      wbuf w = {p->buf, 0, MSG_MAX};
      put_i(&w, seq);
      put(&w, &f, sizeof f);
      put_i(&w, epoch);
      size_t count_at = w.len;
      int count = 0;
      put_i(&w, 0);
      for (int r = 0; r < world; r++) { /* which of its waits rank 0's report showed, in its clock */
        if (host_of[r] != d) continue;
        lab_board_view_get(slot_of[r], v);
        double shown = v->shown == adj_since[r] && v->shown != 0 ? raw_since[r] : 0;
        if (shown == p->shown[r]) continue;
        p->shown[r] = shown;
        put_i(&w, r);
        put_d(&w, shown);
        count++;
      }
      memcpy(w.p + count_at, &count, sizeof count);
      count_at = w.len;
      int views = 0;
      put_i(&w, 0);
      for (int r = 0; r < world && w.len < MSG_MAX / 2; r++) { /* the other hosts' slots it lacks */
        if (host_of[r] == d || version[r] == p->version[r]) continue;
        lab_board_view_get(slot_of[r], v);
        put_view(&w, v, v->since == 0 ? 0 : v->since + clock_off[lead_of[d]]);
        p->version[r] = version[r];
        views++;
      }
      memcpy(w.p + count_at, &views, sizeof views);
      if (!news && !count && !views) continue;
      p->flags = f;
      p->seq = seq;
      p->epoch = epoch;
      MPI_Isend(p->buf, (int)w.len, MPI_BYTE, d, TAG_DOWN, leaders, &p->req);
    }
    hub_nap();
  }
  MPI_Cancel(&up);
  MPI_Wait(&up, MPI_STATUS_IGNORE);
  for (int d = 1; d < lsize; d++) /* a leader that stopped first leaves an eager send unmatched */
    if (peers[d].req != MPI_REQUEST_NULL) MPI_Request_free(&peers[d].req);
}

/* ---- a leader of another host ---- */

typedef struct {
  int fd, source_fd, pid; /* our descriptor on the rank's capture file, and what it was opened from */
  int64_t sent;           /* bytes of it already sent this chunk */
} tap;

/* the complete lines rank i's capture file has past t->sent, up to budget bytes, into w */
static int tap_lines(tap *t, const lab_board_view *v, int epoch, wbuf *w, int budget) {
  if (v->out_fd < 0) return 0;
  if (t->fd < 0 || t->source_fd != v->out_fd || t->pid != v->pid) {
    if (t->fd >= 0) close(t->fd);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", v->pid, v->out_fd);
    t->fd = open(path, O_RDONLY | O_CLOEXEC);
    t->source_fd = v->out_fd;
    t->pid = v->pid;
    t->sent = 0;
    if (t->fd < 0) return 0;
  }
  off_t end = lseek(t->fd, 0, SEEK_END);
  if (end <= t->sent || budget <= 0) return 0;
  int64_t want = end - t->sent < budget ? end - t->sent : budget;
  char *buf = malloc((size_t)want);
  ssize_t got = buf ? pread(t->fd, buf, (size_t)want, t->sent) : -1;
  while (got > 0 && buf[got - 1] != '\n') got--; /* whole lines only */
  if (got > 0) {
    put_i(w, v->world_rank);
    put_i(w, epoch);
    put_i(w, (int)got);
    put_d(w, (double)t->sent);
    put(w, buf, (size_t)got);
    t->sent += got;
  }
  free(buf);
  return got > 0;
}

static void spoke(void) {
  int local = lab_board_local_slots();
  lab_board_view *sent = calloc((size_t)local, sizeof *sent), *v = malloc(sizeof *v);
  tap *taps = calloc((size_t)local, sizeof *taps);
  char *in = malloc(MSG_MAX), *out = malloc(MSG_MAX);
  if (!sent || !v || !taps || !in || !out) return;
  for (int i = 0; i < local; i++) {
    taps[i].fd = -1;
    sent[i].state = -1; /* send every slot the first time */
  }
  int seq = 0, sent_seq = -1, sent_pause = -1, epoch = 0;
  MPI_Request down = MPI_REQUEST_NULL, up = MPI_REQUEST_NULL;
  MPI_Irecv(in, MSG_MAX, MPI_BYTE, 0, TAG_DOWN, leaders, &down);
  struct timespec nap = {0, POLL_NS};
  while (!stop_flag) {
    int got = 0;
    MPI_Status st;
    while (MPI_Test(&down, &got, &st) == MPI_SUCCESS && got) { /* rank 0's flags and the others' slots */
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      rbuf r = {in, (size_t)n, 0};
      int s = get_i(&r);
      lab_board_flags f;
      get(&r, &f, sizeof f);
      lab_board_flags_put(&f);
      int e = get_i(&r);
      if (e != epoch) { /* a new chunk: its output starts from 0 */
        epoch = e;
        for (int i = 0; i < local; i++) {
          if (taps[i].fd >= 0) close(taps[i].fd);
          taps[i].fd = -1;
        }
      }
      for (int k = get_i(&r); k > 0; k--) {
        int w = get_i(&r);
        double shown = get_d(&r);
        if (w >= 0 && w < world) lab_board_shown_put(slot_of[w], shown);
      }
      for (int k = get_i(&r); k > 0; k--) {
        get_view(&r, v);
        if (v->world_rank < 0 || v->world_rank >= world) break;
        lab_board_view_put(slot_of[v->world_rank], v);
      }
      seq = s; /* applied: the next up message says so */
      MPI_Irecv(in, MSG_MAX, MPI_BYTE, 0, TAG_DOWN, leaders, &down);
    }
    int done = 1;
    if (up != MPI_REQUEST_NULL) MPI_Test(&up, &done, MPI_STATUS_IGNORE);
    if (done) {
      lab_board_flags f;
      lab_board_flags_get(&f);
      wbuf w = {out, 0, MSG_MAX};
      put_i(&w, f.pause_epoch);
      put_i(&w, seq);
      size_t count_at = w.len;
      int views = 0, outs = 0, budget = OUT_BUDGET;
      put_i(&w, 0);
      for (int i = 0; i < local; i++) {
        lab_board_view_get(i, v);
        if (same_view(v, &sent[i])) continue;
        put_view(&w, v, v->since);
        sent[i] = *v;
        views++;
      }
      memcpy(w.p + count_at, &views, sizeof views);
      count_at = w.len;
      put_i(&w, 0);
      for (int i = 0; i < local && epoch > 0; i++) {
        lab_board_view_get(i, v);
        size_t before = w.len;
        outs += tap_lines(&taps[i], v, epoch, &w, budget);
        budget -= (int)(w.len - before);
      }
      memcpy(w.p + count_at, &outs, sizeof outs);
      if (views || outs || seq != sent_seq || f.pause_epoch != sent_pause) {
        sent_seq = seq;
        sent_pause = f.pause_epoch;
        MPI_Isend(out, (int)w.len, MPI_BYTE, 0, TAG_UP, leaders, &up);
      }
    }
    nanosleep(&nap, NULL);
  }
  MPI_Cancel(&down);
  MPI_Wait(&down, MPI_STATUS_IGNORE);
  if (up != MPI_REQUEST_NULL) MPI_Request_free(&up);
  for (int i = 0; i < local; i++)
    if (taps[i].fd >= 0) close(taps[i].fd);
}

static void *relay_main(void *arg) {
  (void)arg;
  if (lrank == 0)
    hub();
  else
    spoke();
  return NULL;
}
