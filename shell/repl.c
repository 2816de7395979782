/* The REPL loop on every rank. Rank 0 reads a complete chunk or command and broadcasts it
 * as one message: a kind byte ('C' Lua chunk, 'R' :run a script, 'W' :who, 'S' :step,
 * 'Q' quit), the target ranks ("all" or a rank list), a newline, then the text. Every rank
 * takes part in every message (ranks outside the target only skip the running), so the
 * gather of outputs after each chunk doubles as the check that every rank finished.
 * While a chunk runs: collectives are guarded (a Ctrl-C or the watchdog ends a wait with
 * an error), an instruction-count hook lets Ctrl-C stop Lua loops on every rank, and rank 0
 * watches its terminal for the Ctrl-C byte. */
#define _GNU_SOURCE
#include "repl.h"

#include <lauxlib.h>
#include <poll.h>
#include <pthread.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "completion.h"
#include "grouped.h"
#include "live.h"
#include "report.h"
#include "repl_magic.h"
#include "runtime/lab_control.h"
#include "session.h"
#include "show.h"
#include "stepper.h"
#include "targets.h"
#include "term_info.h"
#include "terminal.h"
#include "watch.h"

static terminal term;
static char default_target[256] = "all";

static const char *help_text =
    "Lua typed here runs on every rank; answers come back grouped by rank ([0-3] same on all).\n"
    "  =expr            print a value (a bare expression works too)\n"
    "  %on 1,3 code     run code on ranks 1 and 3 only (ranges: %on 0-2); their collectives\n"
    "                   use a group of just those ranks\n"
    "  :ranks 0,1       make ranks 0,1 the default target (:ranks all to reset)\n"
    "  :who             every rank's host, pid, device and threads\n"
    "  :run file [args] run a script on the targeted ranks, then come back here (its\n"
    "                   lab.dist.stats count from 0, as when the script runs alone)\n"
    "  :step file [args] step through a script on all ranks (n s finish c b l bt locals p q)\n"
    "  :watchdog secs   report a collective that waits longer than this (0: never)\n"
    "  ?f, f?, help(f)  the docstring of a function of lab (help(lab.dist) lists a namespace)\n"
    "  :time code       run code once; min / median / max wall time over the ranks\n"
    "  :timeit code     as IPython's %timeit: mean time per run, min / median / max over ranks\n"
    "  :tb              the traceback of each rank's error in the last chunk\n"
    "  _, expr;         _ is the last value printed; a trailing ; prints nothing\n"
    "  :help            this text\n"
    "  :quit, Ctrl-D    end every rank\n"
    "Ctrl-C interrupts the running chunk on every rank (also inside collective waits) or\n"
    "clears the line (or the unfinished chunk) at the prompt. Ctrl-T while a chunk runs shows\n"
    "every rank's traceback and collective. Tab completes globals and fields (lab.dist.<TAB>).\n";

/* ---- interrupting ---- */

/* every 1000 instructions: stop on Ctrl-C, and tell the board where we are */
static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  session_check_interrupt(L);
  stepper_pause_if_asked(L); /* another rank stopped in the stepper: join it */
  if (lab_board_info_pending()) { /* Ctrl-T on rank 0: show where this rank is */
    luaL_traceback(L, L, NULL, 0);
    lab_board_answer_info(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_Debug d;
  if (lua_getstack(L, 0, &d) && lua_getinfo(L, "Sl", &d) && d.currentline > 0) {
    char site[128];
    snprintf(site, sizeof site, "%s:%d", d.short_src, d.currentline);
    lab_board_set(LAB_RUNNING, "", site);
  }
}

/* ---- reading ---- */

static int is_blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t') return 0;
  return 1;
}

/* 1 when the chunk typed so far needs more lines: as lua.c, a line that reads as an expression
 * (`x`, `(x)`, `x.dtype`) is complete; otherwise the parser stopping at <eof> means more. */
static int needs_more(lua_State *L, const char *code) {
  char *ret = NULL;
  if (asprintf(&ret, "return %s", code) < 0) return 0;
  int expression = luaL_loadbuffer(L, ret, strlen(ret), "=stdin") == LUA_OK;
  lua_pop(L, 1);
  free(ret);
  return !expression && session_incomplete(L, code, strlen(code));
}

/* Reads one complete chunk on rank 0; NULL at end of input. Ctrl-C or Ctrl-D at the `>>`
 * prompt discards the unfinished chunk, as lua.c's Ctrl-C does. */
static char *read_chunk(lua_State *L) {
  for (;;) {
    char prompt[300] = "> "; /* after :ranks 1,3 the prompt says where code goes: [1,3]> */
    if (strcmp(default_target, "all") != 0) snprintf(prompt, sizeof prompt, "[%s]> ", default_target);
    char *line = terminal_readline(&term, term.interactive ? prompt : "");
    if (!line) return NULL;
    terminal_take_interrupt(&term); /* a Ctrl-C at the first prompt only cleared the line */
    if (is_blank(line)) {
      free(line);
      continue;
    }
    size_t len = strlen(line);
    char *chunk = line;
    size_t code_at = 0;
    if (strncmp(chunk, "%on", 3) == 0 && (chunk[3] == ' ' || chunk[3] == '\t')) { /* code after the ranks */
      char spec[256];
      const char *c = split_rank_list(chunk + 3, spec, sizeof spec);
      code_at = c ? (size_t)(c - chunk) : len;
    }
    int discarded = 0;
    while (chunk[0] != '=' && chunk[0] != ':' && needs_more(L, chunk + code_at)) {
      char *more = terminal_readline(&term, term.interactive ? ">> " : "");
      if (terminal_take_interrupt(&term) || (!more && term.interactive)) { /* Ctrl-C or Ctrl-D at >> */
        if (!more) fputc('\n', term.out);
        free(more);
        discarded = 1;
        break;
      }
      if (!more) break; /* piped input ended: run what there is (its error says what is missing) */
      size_t ml = strlen(more);
      char *joined = realloc(chunk, len + ml + 2);
      if (!joined) {
        free(more);
        break;
      }
      chunk = joined;
      chunk[len] = '\n';
      memcpy(chunk + len + 1, more, ml + 1);
      len += ml + 1;
      free(more);
    }
    terminal_add_history(&term, chunk);
    if (!discarded) return chunk;
    free(chunk);
  }
}

/* ---- running ---- */

typedef enum { RUN_CHUNK, RUN_SCRIPT } run_kind;

/* The wrappers' part of recovery (lua/lab/replicas.lua): after a chunk that ended in an error,
 * each wrapper that saw a step resets it, and data-parallel replicas are compared; rank 0 shows
 * what it found. Every rank calls it (it runs collectives when the chunk was aborted). */
static void recover_wrappers(lua_State *L, int aborted) {
  int top = lua_gettop(L);
  lua_getglobal(L, "lab");
  if (lua_istable(L, -1) && lua_getfield(L, -1, "replicas") == LUA_TTABLE &&
      lua_getfield(L, -1, "_after_chunk") == LUA_TFUNCTION) {
    lua_pushboolean(L, aborted);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK && lab_ctl_rank() == 0)
      fprintf(term.out, "(after the aborted chunk the wrapped models could not be checked: %s)\n", lua_tostring(L, -1));
    else if (lab_ctl_rank() == 0 && lua_isstring(L, -1))
      fprintf(term.out, "%s\n", lua_tostring(L, -1));
  }
  lua_settop(L, top);
}

/* After a chunk, a :run or a :step, every rank here: forget the Ctrl-C, rebuild what an
 * abandoned collective broke, and reset the wrapped models' steps a chunk that ended in an
 * error (`failed` on this rank) cut short */
static void after_every_rank_is_done(lua_State *L, int failed) {
  int rank = lab_ctl_rank();
  if (rank == 0) lab_board_clear_interrupt();
  int aborted = 0; /* on any rank: agreed in recovery's first exchange */
  int recovered = lab_dist_recover_after(failed, &aborted);
  if (rank != 0) lab_board_await_cleared(2.0); /* rank 0 cleared it before recovery */
  if (recovered & LAB_RECOVERED_GROUP_LOST) forget_targets();
  if (rank == 0 && (recovered & LAB_RECOVERED_NEW_WORLD))
    fprintf(term.out, "(the world group was rebuilt after an abandoned collective)\n");
  if (rank == 0 && (recovered & LAB_RECOVERED_GROUP_LOST))
    fprintf(term.out, "(a group with an abandoned collective could not be repaired and stays unusable)\n");
  recover_wrappers(L, aborted);
  if (rank == 0) fflush(term.out);
}

/* A :run counts its lab's own traffic in lab.dist.stats, as when it runs alone: the prompt's
 * running totals are set aside while it runs and added back after, so they include it. */
typedef struct {
  lab_group *g;
  int id;
  lab_coll_stats stats[LAB_NOPS];
} stats_aside;

static stats_aside *set_stats_aside(int *n) {
  *n = lab_dist_group_count();
  stats_aside *a = calloc((size_t)(*n ? *n : 1), sizeof *a);
  for (int i = 0; a && i < *n; i++) {
    lab_group *g = lab_dist_group_at(i);
    if (!g) continue;
    a[i].g = g;
    a[i].id = g->id;
    memcpy(a[i].stats, g->stats, sizeof g->stats);
  }
  lab_dist_reset_stats();
  return a;
}

/* the totals back, onto the groups that still live in their slot (a group the lab made has
 * only its own; one it destroyed is gone with its totals) */
static void add_stats_back(stats_aside *a, int n) {
  for (int i = 0; a && i < n; i++) {
    lab_group *g = lab_dist_group_at(i);
    if (!g || g != a[i].g || g->id != a[i].id) continue;
    for (int op = 0; op < LAB_NOPS; op++) {
      g->stats[op].calls += a[i].stats[op].calls;
      g->stats[op].bytes += a[i].stats[op].bytes;
      g->stats[op].wire_bytes += a[i].stats[op].wire_bytes;
    }
  }
  free(a);
}

/* Runs code (or a script with its arguments) on this rank when it is targeted, output
 * captured, collectives guarded and on the targets' group; then reports on every rank. */
static void run_everywhere(lua_State *L, run_kind kind, const char *spec, const char *text) {
  int rank = lab_ctl_rank(), size = lab_ctl_size();
  term_info_share(L, &term); /* lab.plot draws for rank 0's terminal (term_info.h) */
  int *member = calloc((size_t)size, sizeof *member);
  char perr[256] = "";
  int ok = parse_ranks(spec, member, size, perr, sizeof perr) == 0;
  int mine = ok && member[rank];
  lab_group *g = ok && strcmp(spec, "all") != 0 ? target_group_for(spec, mine) : NULL;
  char *err = NULL;
  capture cap;
  int captured = 0;
  int64_t out_len = 0;
  char *out = NULL;
  /* rank 0 watches the keyboard until every rank is done, targeted or not */
  if (rank == 0) live_begin(size, ok ? member : NULL);
  lab_board_begin_chunk(); /* every rank, targeted or not: the chunks are numbered in step */
  watch_set_running(1);
  watch_start();
  stepper_arm(L);
  if (!ok) {
    if (rank == 0) err = strdup(perr);
  } else if (mine) {
    captured = capture_begin(&cap) == 0;
    if (captured) lab_board_set_output(cap.file_fd); /* rank 0 shows it as it comes */
    lab_dist_set_default(g);
    lab_board_set(LAB_RUNNING, "", "");
    session_reset_interrupt();
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1000);
    if (kind == RUN_CHUNK) { /* with its traceback, shown if other ranks' waits follow from it */
      session_run_chunk(L, text, strlen(text), "=stdin", 1, 1, &err);
    } else { /* a lab counts its own traffic from 0, as when run alone (`llmlab lab.lua`) */
      int ngroups = 0;
      stats_aside *aside = set_stats_aside(&ngroups);
      stepper_run_script(L, text, 0, &err);
      add_stats_back(aside, ngroups);
    }
    /* a Ctrl-C that cut a C call short (a matrix product stops between batches, an iterator
     * between rows) just before the chunk ended, with no Lua instruction left to raise it (not
     * one the chunk's code caught: it went on, by its own choice) */
    if (!err && lab_board_interrupt_requested() && !session_interrupt_raised())
      err = strdup("interrupted! (inside a C call, whose result may be incomplete)");
    lua_sethook(L, NULL, 0, 0);
    lab_dist_set_default(NULL);
    lab_board_set(LAB_IDLE, "", "");
    /* the file stays readable by rank 0 until every rank is done: a finished rank's output
     * streams while the others still run */
    if (captured) out = capture_end_keep(&cap, &out_len);
  }
  lab_board_end_chunk(err != NULL); /* waits for this rank's collectives give up at once now */
  /* a rank that is done still joins the pauses of a rank stopped in the stepper */
  lab_ctl_wait_all_done(stepper_answer_pauses);
  stepper_disarm();
  watch_stop();
  watch_set_running(0);
  if (captured) {
    lab_board_set_output(-1);
    capture_close(&cap);
  }
  report_all(term.out, out, out_len, err);
  int failed = err != NULL;
  free(out);
  free(err);
  free(member);
  after_every_rank_is_done(L, failed);
}

/* :step (and --step): rank 0 watches the keyboard while the script runs between pauses, so
 * Ctrl-C reaches it (read_for_stepper lets go of the terminal at each pause); afterwards the
 * Ctrl-C is forgotten and what a quit abandoned is repaired, as after a chunk (a quit while
 * a rank waited in a collective left the world unusable for the next chunk, whose first
 * collective then waited for the watchdog) */
static void step_everywhere(lua_State *L, const char *cmdline, int then_repair) {
  watch_set_running(1);
  watch_start();
  int failed = stepper_session(L, cmdline, lab_ctl_rank() == 0 ? term.out : stdout) < 0;
  watch_stop();
  watch_set_running(0);
  if (then_repair) after_every_rank_is_done(L, failed);
}

/* :who: each rank's host, pid, device and threads, grouped */
static void who(lua_State *L) {
  int threads = 1, top = lua_gettop(L);
  if (luaL_dostring(L, "return lab.threads()") == LUA_OK) threads = (int)lua_tointeger(L, -1);
  lua_settop(L, top);
  char device[64] = "cpu"; /* where this rank's new tensors go */
  if (luaL_dostring(L, "return lab.default_device()") == LUA_OK && lua_isstring(L, -1))
    snprintf(device, sizeof device, "%s", lua_tostring(L, -1));
  lua_settop(L, top);
  char line[512];
  snprintf(line, sizeof line, "host %s, pid %d, device %s, %d thread%s, local rank %d of %d\n", lab_ctl_host(),
           (int)getpid(), device, threads, threads == 1 ? "" : "s", lab_ctl_local_rank(), lab_ctl_local_size());
  report_all(term.out, line, (int64_t)strlen(line), NULL);
}

/* Turns what rank 0 read into a message; NULL for commands handled on rank 0 alone. */
static char *message_for(char *chunk, int *quit) {
  char *msg = NULL;
  if (strcmp(chunk, ":quit") == 0 || strcmp(chunk, ":q") == 0) {
    *quit = 1;
    return NULL;
  }
  int magic = 0; /* ?f, f?, :time, :timeit, :tb (repl_magic.c) */
  msg = magic_message(chunk, default_target, term.out, &magic);
  if (magic) return msg;
  if (strcmp(chunk, ":help") == 0) {
    fputs(help_text, term.out);
    return NULL;
  }
  if (strncmp(chunk, ":ranks", 6) == 0 && (chunk[6] == 0 || chunk[6] == ' ' || chunk[6] == '\t')) {
    const char *arg = chunk + 6;
    while (*arg == ' ' || *arg == '\t') arg++;
    if (!*arg) {
      fprintf(term.out, "default target: %s\n", default_target);
      return NULL;
    }
    char spec[256], err[256] = "";
    const char *rest = split_rank_list(arg, spec, sizeof spec);
    int *member = calloc((size_t)lab_ctl_size(), sizeof *member);
    if (!rest || *rest) fprintf(term.out, "error: :ranks %s: cannot read the rank list (use e.g. :ranks 1,3 or :ranks 0-2 or :ranks all)\n", arg);
    else if (parse_ranks(spec, member, lab_ctl_size(), err, sizeof err) < 0) fprintf(term.out, "error: :ranks %s: %s\n", arg, err);
    else snprintf(default_target, sizeof default_target, "%s", spec);
    free(member);
    return NULL;
  }
  if (strcmp(chunk, ":who") == 0) {
    if (asprintf(&msg, "W%s\n", default_target) < 0) msg = NULL;
    return msg;
  }
  if (strcmp(chunk, ":watchdog") == 0) { /* alone: say what it is (it used to set 30 s) */
    if (asprintf(&msg, "Call\nprint(string.format('watchdog: %%g s (a collective waiting longer is reported; "
                       ":watchdog 0: never)', lab.dist.watchdog()));") < 0)
      msg = NULL;
    return msg;
  }
  if (strncmp(chunk, ":watchdog", 9) == 0 && (chunk[9] == 0 || chunk[9] == ' ')) {
    char *end = NULL;
    double secs = chunk[9] ? strtod(chunk + 9, &end) : 30;
    while (end && *end == ' ') end++;
    if ((end && *end) || secs < 0 || secs != secs) {
      fprintf(term.out, "error: %s: give the seconds a collective may wait (e.g. :watchdog 10; 0: never)\n", chunk);
      return NULL;
    }
    if (asprintf(&msg, "Call\nlab.dist.set_watchdog(%.17g)", secs) < 0) msg = NULL;
    return msg;
  }
  if (strncmp(chunk, ":run ", 5) == 0) {
    if (asprintf(&msg, "R%s\n%s", default_target, chunk + 5) < 0) msg = NULL;
    return msg;
  }
  if (strncmp(chunk, ":step ", 6) == 0) {
    if (asprintf(&msg, "Sall\n%s", chunk + 6) < 0) msg = NULL;
    return msg;
  }
  if (chunk[0] == ':') {
    fprintf(term.out, "unknown command %s (:help lists them)\n", chunk);
    return NULL;
  }
  if (strncmp(chunk, "%on", 3) == 0 && (chunk[3] == 0 || chunk[3] == ' ' || chunk[3] == '\t')) {
    char spec[256], err[256] = "";
    const char *code = split_rank_list(chunk + 3, spec, sizeof spec);
    int *member = calloc((size_t)lab_ctl_size(), sizeof *member);
    int bad = !code || parse_ranks(spec, member, lab_ctl_size(), err, sizeof err) < 0;
    free(member);
    if (!code) fprintf(term.out, "error: %%on: cannot read the rank list (use e.g. %%on 1,3 print(x) or %%on 0-2 code)\n");
    else if (bad) fprintf(term.out, "error: %%on %s: %s\n", spec, err);
    else if (!*code) fprintf(term.out, "error: %%on %s: no code to run (e.g. %%on %s print(lab.dist.rank()))\n", spec, spec);
    if (bad || !*code) return NULL;
    if (asprintf(&msg, "C%s\n%s", spec, code) < 0) msg = NULL;
    return msg;
  }
  if (asprintf(&msg, "C%s\n%s", default_target, chunk) < 0) msg = NULL;
  return msg;
}

/* the stepper reads its commands on rank 0; inside a running chunk (:run reaching
 * lab.breakpoint) the Ctrl-C watcher lets go of the terminal meanwhile */
static char *read_for_stepper(const char *prompt) {
  int was_watching = watch_active();
  if (was_watching) watch_stop();
  fflush(term.out);
  char *line = terminal_readline(&term, term.interactive ? prompt : "");
  while (line && terminal_take_interrupt(&term)) { /* Ctrl-C clears the line; it is not a step */
    free(line);
    line = terminal_readline(&term, term.interactive ? prompt : "");
  }
  if (line && line[0]) terminal_add_history(&term, line);
  if (was_watching) watch_start();
  return line;
}

static void open_terminal_on_rank0(lua_State *L) {
  if (lab_ctl_rank() != 0) return;
  terminal_open(&term);
  watch_init(&term);
  rl_catch_signals = 0;
  rl_getc_function = watch_getc;
  completion_install(L);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = watch_on_sigint;
  sigaction(SIGINT, &sa, NULL);
  stepper_set_terminal(read_for_stepper, term.out);
}

void repl_attach_terminal(lua_State *L) {
  lab_dist_set_guarded(1);
  open_terminal_on_rank0(L);
  if (lab_ctl_rank() != 0) stepper_set_terminal(NULL, stdout);
}

void repl_step_main(lua_State *L, const char *cmdline) {
  lab_dist_set_guarded(1);
  lab_dist_set_checked(1);
  open_terminal_on_rank0(L);
  step_everywhere(L, cmdline, 0);
  if (lab_ctl_rank() == 0) terminal_close(&term);
}

void repl_run(lua_State *L) {
  int rank = lab_ctl_rank();
  lab_dist_set_guarded(1);
  show_install_print(L); /* tables print their contents, so equal ones group across ranks */
  /* output is labelled by rank here: print_ranks prints each rank's line where it is */
  if (luaL_dostring(L, "lab.dist.output_labelled = true") != LUA_OK) lua_pop(L, 1);
  const char *wd = getenv("LLMLAB_WATCHDOG");
  lab_dist_set_watchdog(wd ? atof(wd) : 30.0);
  open_terminal_on_rank0(L);
  if (rank == 0) {
    if (term.interactive)
      fprintf(term.out, "llmlab %s on %d rank%s. :help for commands, :quit or Ctrl-D to leave.\n", LLMLAB_VERSION,
              lab_ctl_size(), lab_ctl_size() > 1 ? "s" : "");
  }
  for (;;) {
    char *msg = NULL;
    int64_t len = 0;
    if (rank == 0) {
      int quit = 0;
      while (!msg && !quit) {
        char *chunk = read_chunk(L);
        if (!chunk) break;
        msg = message_for(chunk, &quit);
        free(chunk);
        fflush(term.out);
      }
      if (!msg && asprintf(&msg, "Q") < 0) msg = NULL;
      len = msg ? (int64_t)strlen(msg) : 0;
    }
    lab_ctl_bcast(&msg, &len);
    char kind = msg[0];
    char *spec = msg + 1, *text = strchr(spec, '\n');
    if (text) *text++ = 0;
    if (kind == 'Q') {
      free(msg);
      break;
    }
    if (kind == 'C') run_everywhere(L, RUN_CHUNK, spec, text ? text : "");
    else if (kind == 'R') run_everywhere(L, RUN_SCRIPT, spec, text ? text : "");
    else if (kind == 'W') who(L);
    else if (kind == 'S') step_everywhere(L, text ? text : "", 1);
    if (rank == 0) fflush(term.out);
    free(msg);
  }
  if (rank == 0) {
    if (term.interactive) fputc('\n', term.out);
    terminal_close(&term);
  }
}
