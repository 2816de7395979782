/* The REPL loop on every rank. Messages on the control channel are one kind byte ('C' a
 * chunk to run, 'Q' quit) followed by the chunk text. After every chunk each rank's output
 * and error reach rank 0 (the gather doubles as the check that every rank finished). */
#define _GNU_SOURCE
#include "repl.h"

#include <lauxlib.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "grouped.h"
#include "runtime/dist/control.h"
#include "session.h"
#include "terminal.h"

static lua_State *volatile running; /* set while a chunk runs on rank 0 */
static terminal term;

/* Ctrl-C: interrupt the running chunk, or clear the line at the prompt. */
static void on_sigint(int sig) {
  (void)sig;
  if (running) {
    session_interrupt(running);
    return;
  }
  terminal_clear_line(&term);
}

char *with_rank_prefix(int rank, const char *msg) {
  char head[32];
  int hl = snprintf(head, sizeof head, "rank %d: ", rank);
  char *out = malloc(strlen(msg) + (size_t)hl + 1);
  if (!out) return NULL;
  if (strncmp(msg, head, (size_t)hl) == 0) strcpy(out, msg);
  else sprintf(out, "%s%s", head, msg);
  return out;
}

static int is_blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t') return 0;
  return 1;
}

/* Reads one complete chunk on rank 0; NULL at end of input or :quit. */
static char *read_chunk(lua_State *L) {
  char *line;
  for (;;) {
    line = terminal_readline(&term, term.interactive ? "> " : "");
    if (!line) return NULL;
    if (!is_blank(line)) break;
    free(line);
  }
  if (strcmp(line, ":quit") == 0 || strcmp(line, ":q") == 0) {
    terminal_add_history(&term, line);
    free(line);
    return NULL;
  }
  size_t len = strlen(line);
  char *chunk = line;
  /* a chunk the parser finds unfinished at <eof> continues on the next line */
  while (chunk[0] != '=' && chunk[0] != ':' && session_incomplete(L, chunk, len)) {
    char *more = terminal_readline(&term, term.interactive ? ">> " : "");
    if (!more) break;
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
  return chunk;
}

/* Runs a chunk on this rank and brings every rank's output and error to rank 0. */
static void run_and_report(lua_State *L, const char *code, int64_t len) {
  int rank = lab_ctl_rank(), size = lab_ctl_size();
  capture cap;
  int captured = capture_begin(&cap) == 0;
  char *err = NULL;
  running = L;
  int rc = session_run_chunk(L, code, (size_t)len, "=stdin", 1, 0, &err);
  running = NULL;
  lua_sethook(L, NULL, 0, 0); /* an interrupt that arrived after the chunk ended */
  int64_t out_len = 0;
  char *out = captured ? capture_end(&cap, &out_len) : NULL;
  /* errors travel as "error: msg" without the rank: the display prefixes the rank set */
  char *err_text = NULL;
  int64_t err_len = 0;
  if (rc < 0) {
    char head[32];
    int hl = snprintf(head, sizeof head, "rank %d: ", rank);
    const char *msg = err ? err : "error";
    if (strncmp(msg, head, (size_t)hl) == 0) msg += hl;
    if (asprintf(&err_text, "error: %s", msg) < 0) err_text = NULL;
    err_len = err_text ? (int64_t)strlen(err_text) : 0;
  }
  char *all_out = NULL, *all_err = NULL;
  int64_t *out_lens = NULL, *err_lens = NULL;
  lab_ctl_gather(out ? out : "", out_len, &all_out, &out_lens);
  lab_ctl_gather(err_text ? err_text : "", err_len, &all_err, &err_lens);
  if (rank == 0) {
    const char **texts = malloc(sizeof *texts * (size_t)size);
    const char **etexts = malloc(sizeof *etexts * (size_t)size);
    int64_t o = 0, e = 0;
    for (int r = 0; r < size; r++) {
      texts[r] = all_out + o;
      o += out_lens[r];
      etexts[r] = all_err + e;
      e += err_lens[r];
    }
    print_grouped(term.out, size, texts, out_lens, size > 1);
    print_grouped(term.out, size, etexts, err_lens, size > 1);
    free(texts);
    free(etexts);
  }
  free(all_out);
  free(all_err);
  free(out_lens);
  free(err_lens);
  free(out);
  free(err);
  free(err_text);
}

void repl_run(lua_State *L) {
  int rank = lab_ctl_rank();
  if (rank == 0) {
    terminal_open(&term);
    rl_catch_signals = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    if (term.interactive)
      fprintf(term.out, "llmlab %s on %d rank%s. :quit or Ctrl-D to leave.\n", LLMLAB_VERSION,
              lab_ctl_size(), lab_ctl_size() > 1 ? "s" : "");
  }
  for (;;) {
    char *msg = NULL;
    int64_t len = 0;
    if (rank == 0) {
      char *chunk = read_chunk(L);
      len = chunk ? (int64_t)strlen(chunk) + 1 : 1;
      msg = malloc((size_t)len + 1);
      msg[0] = chunk ? 'C' : 'Q';
      if (chunk) memcpy(msg + 1, chunk, (size_t)len);
      free(chunk);
    }
    lab_ctl_bcast(&msg, &len);
    if (msg[0] == 'Q') {
      free(msg);
      break;
    }
    run_and_report(L, msg + 1, len - 1);
    free(msg);
  }
  if (rank == 0) {
    if (term.interactive) fputc('\n', term.out);
    terminal_close(&term);
  }
}
