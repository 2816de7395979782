/* llmlab: one process per MPI rank, each with Lua and the lab module.
 *   llmlab [options] [script.lua [args...]]
 * Without a script (or with -i) rank 0 runs the REPL for all ranks. */
#define _GNU_SOURCE
#include <lauxlib.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "grouped.h"
#include "launcher.h"
#include "repl.h"
#include "report.h"
#include "runtime/lab_control.h"
#include "session.h"
#include "stepper.h"

static const char *usage =
    "usage: llmlab [options] [script.lua [args...]]\n"
    "  -n N                 run N ranks (re-runs itself under mpirun)\n"
    "  -e CODE              run CODE on every rank (may repeat)\n"
    "  -i                   enter the REPL after the script or -e code\n"
    "  --check-collectives  cross-check every collective's arguments on all ranks\n"
    "  --device DEV         default device for new tensors: cpu, cuda, cuda:N, or sim (a testing\n"
    "                       device whose memory host code cannot touch); sets LLMLAB_DEVICE\n"
    "  --step script.lua   step through the script on every rank (n s finish c b l bt p q)\n"
    "  --plan key=value ... what-if planner, e.g. --plan model=llama3-70b gpus=1024 gpu=h100\n"
    "                       global_batch=1024 seq=8192 [top=10] [csv|json] [explain] [infeasible]\n"
    "  --version            print the version, and whether CUDA is compiled in and finds a GPU\n"
    "  -h, --help           this text\n"
    "Environment: LLMLAB_THREADS (threads per rank), LLMLAB_CHECK_COLLECTIVES=1,\n"
    "LLMLAB_WATCHDOG (seconds a collective may wait in the REPL or a checked script, 30; in a\n"
    "plain script only when set),\n"
    "LLMLAB_ERROR_TIMEOUT (seconds to wait for other ranks after an error, default 10).\n"
    "Plain `mpirun -np 4 llmlab` works too; as root add --allow-run-as-root.\n";

typedef struct {
  int plan;         /* argv index after --plan, or 0 */
  int step;         /* argv index of the script after --step, or 0 */
  int n;            /* -n value, 0 if absent */
  int n_index;      /* argv index of -n */
  int n_args;       /* 2 for "-n N", 1 for "-nN" */
  int interactive;  /* -i */
  int check;        /* --check-collectives */
  int script;       /* argv index of the script, or 0 */
  int ncode;
  const char *code[64];
} options;

static int parse(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) {
      o->script = i;
      return 0;
    }
    if (strcmp(a, "--step") == 0) { /* the rest are the script and its arguments */
      if (i + 1 >= argc) {
        fprintf(stderr, "llmlab: --step needs a script\n");
        return -1;
      }
      o->step = i + 1;
      return 0;
    }
    if (strcmp(a, "--plan") == 0) { /* the rest are the planner's key=value options */
      o->plan = i + 1;
      return 0;
    }
    if (strcmp(a, "--") == 0) {
      if (i + 1 < argc) o->script = i + 1;
      return 0;
    }
    if (strcmp(a, "-n") == 0 || strncmp(a, "-n", 2) == 0) {
      const char *v = a[2] ? a + 2 : (i + 1 < argc ? argv[i + 1] : NULL);
      char *end;
      long n = v ? strtol(v, &end, 10) : 0;
      if (!v || *end || n < 1) {
        fprintf(stderr, "llmlab: -n needs a positive number of ranks\n");
        return -1;
      }
      o->n = (int)n;
      o->n_index = i;
      o->n_args = a[2] ? 1 : 2;
      if (!a[2]) i++;
    } else if (strcmp(a, "-e") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "llmlab: -e needs code\n");
        return -1;
      }
      if (o->ncode < 64) o->code[o->ncode++] = argv[++i];
    } else if (strcmp(a, "-i") == 0) {
      o->interactive = 1;
    } else if (strcmp(a, "--check-collectives") == 0) {
      o->check = 1;
    } else if (strcmp(a, "--device") == 0 || strncmp(a, "--device=", 9) == 0) {
      const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v || !*v) {
        fprintf(stderr, "llmlab: --device needs cpu, cuda, cuda:N or sim\n");
        return -1;
      }
      setenv("LLMLAB_DEVICE", v, 1); /* read when the lab module loads, on every rank */
    } else if (strcmp(a, "--version") == 0) {
      /* opens the CUDA plugin now (never at start) to say whether CUDA is usable, and from where */
      char libs[4096];
      printf("llmlab %s (Lua 5.4, MPI, OpenBLAS %s kernels)\n%s\n%s\n", LLMLAB_VERSION, lab_blas_corename(),
             lab_cuda_status(), lab_cuda_libraries(libs, sizeof libs));
      exit(0);
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(usage, stdout);
      exit(0);
    } else {
      fprintf(stderr, "llmlab: unknown option '%s'\n%s", a, usage);
      return -1;
    }
  }
  return 0;
}

/* Threads per rank: the cores this rank may use, shared among the ranks on this node. */
static void set_threads(void) {
  const char *env = getenv("LLMLAB_THREADS");
  int n;
  if (env && atoi(env) > 0) {
    n = atoi(env);
  } else {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    int allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
    n = (int)(online / lab_ctl_local_size());
    if (n > allowed) n = allowed;
    if (n < 1) n = 1;
  }
  lab_set_num_threads(n);
}

/* an error that follows from another rank's (a wait given up because that rank had finished:
 * fail fast) is kept and shown once for all such ranks when every rank is done */
static char *followed_error;

static void report_error(const char *err) {
  char *msg = with_rank_prefix(lab_ctl_rank(), err);
  if (lab_board_gave_up_for_member()) {
    char head[32];
    int hl = snprintf(head, sizeof head, "rank %d: ", lab_ctl_rank());
    if (strncmp(err, head, (size_t)hl) == 0) err += hl; /* the label [0,2-3] names the ranks */
    const char *tb = strstr(err, "\nstack traceback:"); /* where it waited says nothing new */
    free(followed_error);
    followed_error = tb ? strndup(err, (size_t)(tb - err)) : strdup(err);
    free(msg);
    return;
  }
  fprintf(stderr, "%s\n", msg ? msg : err);
  fflush(stderr);
  free(msg);
}

/* Every rank reports whether it failed; a failed rank waits a bounded time for the others
 * (which may be blocked in a collective it never reached) and then aborts the job, so an
 * error never turns into a silent hang. Returns the job's exit status. */
static int finish_batch(int failed) {
  const char *env = getenv("LLMLAB_ERROR_TIMEOUT");
  double timeout = env ? atof(env) : 10.0;
  /* done: still answer the stepper's pauses of ranks that stopped at a lab.breakpoint() */
  if (stepper_batch_done(failed ? timeout : 0) == 1) {
    fprintf(stderr, "rank %d: the other ranks did not finish within %.0f s of this error "
            "(probably waiting in a collective this rank never reached); aborting the job\n",
            lab_ctl_rank(), timeout);
    fflush(stderr);
    lab_ctl_abort(1);
  }
  /* the waits that followed from another rank's stop: one report, the ranks grouped */
  print_from_all(stderr, followed_error, followed_error ? (int64_t)strlen(followed_error) : 0, 1);
  free(followed_error);
  followed_error = NULL;
  int any = 0;
  lab_ctl_max(failed, &any, 0);
  /* every rank is here: a message sent but never received is reported and dropped (rank N:
   * dropped a message from rank M ...), not discarded silently by MPI_Finalize */
  if (!any) lab_dist_recover();
  return any ? 1 : 0;
}

/* Settings that OpenBLAS and libgomp read only when they load, so they are put into the
 * environment and the program re-executed (exec keeps the pid, so it is safe under mpirun
 * too); a value the user set is kept:
 * - OPENBLAS_CORETYPE when OpenBLAS misjudged the CPU (see lab_blas_better_coretype);
 * - OMP_WAIT_POLICY=PASSIVE when the cores are shared (by this node's ranks, counted from
 *   the launcher's environment before MPI starts, or by other work; see
 *   lab_threads_should_wait_passively): a spinning idle thread would take the core a working
 *   one waits for. Measured in the commit that added it. */
static void fix_loader_env(char **argv) {
  int again = 0;
  const char *better = getenv("OPENBLAS_CORETYPE") ? NULL : lab_blas_better_coretype();
  if (better) {
    setenv("OPENBLAS_CORETYPE", better, 1);
    again = 1;
  }
  if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
    const char *ranks = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!ranks) ranks = getenv("MPI_LOCALNRANKS");
    const char *threads = getenv("LLMLAB_THREADS");
    if (lab_threads_should_wait_passively(ranks ? atoi(ranks) : 1, threads ? atoi(threads) : 0)) {
      setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
      again = 1;
    }
  }
  if (again) execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
  fix_loader_env(argv);
  options o;
  if (parse(argc, argv, &o) < 0) return 2;
  if (o.n > 0 && !launched_by_mpi()) return launch_under_mpirun(o.n, argc, argv, o.n_index, o.n_args) < 0 ? 1 : 0;
  if (lab_ctl_init(&argc, &argv) < 0) {
    fprintf(stderr, "llmlab: MPI initialisation failed\n");
    return 1;
  }
  set_threads();
  lua_State *L = session_new();
  if (!L) {
    lab_ctl_finalize();
    return 1;
  }
  if (o.check || (getenv("LLMLAB_CHECK_COLLECTIVES") && atoi(getenv("LLMLAB_CHECK_COLLECTIVES")))) {
    /* checked scripts are guarded too: a rank that never arrives is reported by the
     * watchdog (LLMLAB_WATCHDOG seconds, 30 by default) instead of hanging the job */
    lab_dist_set_checked(1);
    lab_dist_set_guarded(1);
    const char *wd = getenv("LLMLAB_WATCHDOG");
    lab_dist_set_watchdog(wd ? atof(wd) : 30.0);
  } else if (getenv("LLMLAB_WATCHDOG")) {
    /* plain scripts wait in collectives guarded too (stepper_arm_batch), but with no watchdog
     * unless asked: set, a rank that never arrives is reported (what every rank is doing)
     * instead of hanging the job. The test suite sets it, so that a hang says where it was. */
    lab_dist_set_watchdog(atof(getenv("LLMLAB_WATCHDOG")));
  }
  if (o.plan) { /* the planner is arithmetic: one rank answers */
    session_set_args(L, argv, argc, o.plan - 1);
    char *err = NULL;
    const char *code = "lab.plan.cli(arg)";
    int rc = lab_ctl_rank() == 0 ? session_run_chunk(L, code, strlen(code), "=--plan", 0, 0, &err) : 0;
    if (rc < 0) {
      fprintf(stderr, "llmlab --plan: %s\n", err);
      free(err);
    }
    lua_close(L);
    lab_ctl_finalize();
    return rc < 0 ? 1 : 0;
  }
  session_set_args(L, argv, argc, o.script ? o.script : 0);
  stepper_register(L);
  if (o.step) {
    char cmdline[4096] = "";
    size_t used = 0;
    for (int i = o.step; i < argc && used < sizeof cmdline - 2; i++)
      used += (size_t)snprintf(cmdline + used, sizeof cmdline - used, i > o.step ? " %s" : "%s", argv[i]);
    repl_step_main(L, cmdline);
    lua_close(L);
    lab_ctl_finalize();
    return 0;
  }

  int failed = 0;
  int batch = o.script || o.ncode;
  if (batch) stepper_arm_batch(L);
  if (batch) { /* the run is one chunk: waits for a finished rank end at once */
    lab_board_begin_chunk();
    lab_board_set(LAB_RUNNING, "", ""); /* reports show it running, not idle (for 0.0 s) */
  }
  /* -e code alone on several ranks: its output comes back labelled and in rank order, as at
   * the prompt ([0-3] same on all), instead of the ranks' lines interleaved as they come */
  int grouped = o.ncode > 0 && !o.script && !o.interactive && lab_ctl_size() > 1;
  capture cap;
  int captured = grouped && capture_begin(&cap) == 0;
  if (captured && luaL_dostring(L, "lab.dist.output_labelled = true") != LUA_OK) lua_pop(L, 1);
  char *err_e = NULL;
  for (int i = 0; i < o.ncode && !failed; i++)
    if (session_run_chunk(L, o.code[i], strlen(o.code[i]), "=(command line)", 0, 1, &err_e) < 0) failed = 1;
  char *e_out = NULL;
  int64_t e_len = 0;
  if (captured) e_out = capture_end(&cap, &e_len);
  if (e_out && failed) { /* a failed rank may be aborted below: its lines go out now */
    fwrite(e_out, 1, (size_t)e_len, stdout);
    fflush(stdout);
    e_len = 0;
  }
  if (failed) {
    report_error(err_e);
    free(err_e);
  }
  if (o.script && !failed) {
    char *err = NULL;
    const char *path = strcmp(argv[o.script], "-") == 0 ? NULL : argv[o.script];
    if (session_run_file(L, path, &err) < 0) {
      report_error(err);
      free(err);
      failed = 1;
    }
  }
  int status = 0;
  if (batch) {
    /* done: idle; a rank that failed keeps showing where (the others' reports name its wait) */
    if (!failed) lab_board_set(LAB_IDLE, "", "");
    lab_board_end_chunk(failed);
    fflush(stdout);
    status = finish_batch(failed);
  }
  if (captured) { /* every rank is here (finish_batch): rank 0 shows them grouped */
    print_from_all(stdout, e_out, e_len, 1);
    if (lab_ctl_rank() == 0) fflush(stdout);
    free(e_out);
  }
  if (!batch || (o.interactive && !status)) {
    lab_dist_set_checked(1); /* the REPL cross-checks collectives by default */
    repl_run(L);
  }
  lua_close(L);
  lab_ctl_finalize();
  return status;
}
