/* lab.terminal from rank 0's terminal (see term_info.h). */
#define _GNU_SOURCE
#include "term_info.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "launcher.h"
#include "runtime/lab_control.h"

static int columns_of(int fd) {
  struct winsize ws;
  if (!isatty(fd)) return 0;
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

/* rank 0: the width of the terminal its output reaches, 0 for none. The relayed terminal is
 * the user's; otherwise stdout, which under mpirun is mpirun's (a pty even when the user's
 * output is a file), so there the launcher's word (LLMLAB_TERM) counts. */
static int rank0_columns(const terminal *t) {
  if (t->tty_fd >= 0) return columns_of(t->tty_fd);
  const char *env = getenv("LLMLAB_TERM");
  if (env) return atoi(env) > 0 ? atoi(env) : 0;
  if (launched_by_mpi()) return 0;
  return columns_of(fileno(t->out));
}

static int colour_allowed(void) {
  const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
  return !(no && *no) && term && *term && strcmp(term, "dumb") != 0; /* no TERM: say nothing of colour */
}

/* t[key] = value (as a boolean when as_boolean) in the table on top */
static void set_field(lua_State *L, const char *key, int value, int as_boolean) {
  if (as_boolean) lua_pushboolean(L, value);
  else lua_pushinteger(L, value);
  lua_setfield(L, -2, key);
}

void term_info_share(lua_State *L, const terminal *t) {
  char *msg = NULL;
  int64_t len = 0;
  char mine[64];
  if (lab_ctl_rank() == 0) {
    int cols = rank0_columns(t);
    len = snprintf(mine, sizeof mine, "%d %d", cols, cols > 0 && colour_allowed());
    msg = mine;
  }
  if (lab_ctl_size() > 1) lab_ctl_bcast(&msg, &len);
  int cols = 0, colour = 0;
  if (msg && sscanf(msg, "%d %d", &cols, &colour) != 2) cols = colour = 0;
  if (msg != mine) free(msg);
  int top = lua_gettop(L);
  lua_getglobal(L, "lab");
  if (lua_istable(L, -1)) {
    lua_createtable(L, 0, 2);
    if (cols > 0) set_field(L, "columns", cols, 0); /* no columns: not a terminal */
    set_field(L, "colour", colour, 1);
    lua_setfield(L, -2, "terminal");
  }
  lua_settop(L, top);
}
