/* The stepper. Every pause is one exchange on the control channel in which every rank
 * takes part: positions (and the output since the last pause) go to rank 0, rank 0
 * broadcasts a command, every rank answers; resuming commands end the exchange. */
#define _GNU_SOURCE
#include "stepper.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "grouped.h"
#include "runtime/dist/board.h"
#include "runtime/dist/clock.h"
#include "runtime/dist/control.h"
#include "runtime/dist/dist.h"
#include "repl.h"
#include "session.h"
#include "show.h"

enum { MODE_INTO, MODE_OVER, MODE_FINISH, MODE_CONTINUE, MODE_QUIT };

#define PAUSE_GRACE_S 0.5 /* how long a running rank may go on to reach the place another stopped at */

typedef struct breakpoint {
  int id;
  char file[256];
  int line;
  char cond[256];
  int temporary; /* tbreak: deleted when first hit */
  struct breakpoint *next;
} breakpoint;

static struct {
  lua_State *L;
  int active;
  int mode, target_depth;
  breakpoint *bps;
  int next_bp;
  capture cap;
  int capturing;
  char *(*read_line)(const char *prompt);
  FILE *out;
  char *tail; /* output after the last pause */
  int own_capture; /* the stepper captures output itself (--step, :step), not the REPL */
} st;

void stepper_set_terminal(char *(*read_line)(const char *prompt), FILE *out) {
  st.read_line = read_line;
  st.out = out;
}

static int stack_depth(lua_State *L) {
  lua_Debug ar;
  int d = 0;
  while (lua_getstack(L, d, &ar)) d++;
  return d;
}

/* the text of line n of a file (cached per file is not worth it at human speed) */
static void source_line(const char *src, int n, char *buf, size_t size) {
  buf[0] = 0;
  if (!src || src[0] != '@') return;
  FILE *f = fopen(src + 1, "r");
  if (!f) return;
  char line[480];
  for (int i = 1; fgets(line, sizeof line, f); i++)
    if (i == n) {
      line[strcspn(line, "\r\n")] = 0;
      const char *p = line;
      while (*p == ' ' || *p == '\t') p++;
      snprintf(buf, size, "%s", p);
      break;
    }
  fclose(f);
}

/* ---- the exchange ---- */

static void show_from_all(const char *mine) {
  char *all = NULL;
  int64_t *lens = NULL;
  lab_ctl_gather(mine ? mine : "", mine ? (int64_t)strlen(mine) : 0, &all, &lens);
  if (lab_ctl_rank() == 0) {
    int n = lab_ctl_size();
    const char **texts = malloc(sizeof *texts * (size_t)n);
    int64_t o = 0;
    for (int r = 0; r < n; r++) {
      texts[r] = all + o;
      o += lens[r];
    }
    print_grouped(st.out ? st.out : stdout, n, texts, lens, n > 1);
    free(texts);
  }
  free(all);
  free(lens);
}

/* what a rank answers to p, locals, bt, l (malloc'ed text) */
static char *answer(lua_State *L, const char *cmd, int level) {
  char *out = NULL;
  lua_Debug ar;
  int frame = lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar);
  if (strcmp(cmd, "bt") == 0) {
    luaL_traceback(L, L, NULL, level);
    out = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
  } else if (strcmp(cmd, "locals") == 0) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *name;
    for (int i = 1; frame && (name = lua_getlocal(L, &ar, i)); i++) {
      if (name[0] != '(') { /* strings quoted, tensors by their first line, tables compact */
        show_value_short(L, -1);
        lua_pushfstring(L, "%s = %s\n", name, lua_tostring(L, -1));
        lua_remove(L, -2); /* the shown text */
        lua_remove(L, -2); /* the local */
        luaL_addvalue(&b);
      } else {
        lua_pop(L, 1);
      }
    }
    luaL_pushresult(&b);
    out = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
  } else if (strcmp(cmd, "l") == 0 || strcmp(cmd, "list") == 0 || strncmp(cmd, "l ", 2) == 0) {
    size_t cap = 4096, len = 0;
    out = malloc(cap);
    out[0] = 0;
    int around = frame ? ar.currentline : 0; /* l N: around line N of the current file */
    if (strncmp(cmd, "l ", 2) == 0 && atoi(cmd + 2) > 0) around = atoi(cmd + 2);
    for (int n = frame ? around - 3 : 0; frame && n <= around + 3; n++) {
      if (n < 1) continue;
      char text[512];
      source_line(ar.source, n, text, sizeof text);
      len += (size_t)snprintf(out + len, cap - len, "%s%4d  %s\n", n == ar.currentline ? "->" : "  ", n, text);
      if (len >= cap) break;
    }
  } else if (strncmp(cmd, "p ", 2) == 0) {
    /* evaluate with the paused frame's locals and upvalues visible, globals behind them */
    lua_newtable(L);
    int env = lua_gettop(L);
    if (frame) {
      lua_getinfo(L, "f", &ar);
      int fn = lua_gettop(L);
      const char *name;
      for (int i = 1; (name = lua_getupvalue(L, fn, i)); i++) lua_setfield(L, env, name);
      for (int i = 1; (name = lua_getlocal(L, &ar, i)); i++) {
        if (name[0] != '(') lua_setfield(L, env, name);
        else lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    lua_newtable(L);
    lua_pushglobaltable(L);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, env);
    const char *expr = cmd + 2;
    char *code = NULL;
    if (asprintf(&code, "return %s", expr) < 0) code = NULL;
    int rc = code ? luaL_loadbuffer(L, code, strlen(code), "=p") : LUA_ERRMEM;
    free(code);
    int base = lua_gettop(L);
    if (rc == LUA_OK) {
      lua_pushvalue(L, env);
      lua_setupvalue(L, -2, 1);
      rc = lua_pcall(L, 0, LUA_MULTRET, 0);
    }
    /* every value, tab-separated as print does (p step, rank) */
    int nres = lua_gettop(L) - base + 1; /* the function slot holds the first result or the error */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (rc != LUA_OK) luaL_addstring(&b, "error: ");
    for (int i = 0; i < nres; i++) {
      if (i) luaL_addchar(&b, '\t');
      luaL_tolstring(L, base + i, NULL);
      luaL_addvalue(&b);
    }
    if (nres == 0) luaL_addstring(&b, "(no value)");
    luaL_addchar(&b, '\n');
    luaL_pushresult(&b);
    out = strdup(lua_tostring(L, -1));
    lua_settop(L, env - 1);
  }
  return out;
}

/* b file:line [cond], or b line [cond] in the file the rank is paused in (here) */
static void add_breakpoint(const char *spec, const char *here, int temporary) {
  breakpoint *b = calloc(1, sizeof *b);
  if (!b) return;
  char file[256] = "";
  int line = 0, used = 0;
  while (*spec == ' ') spec++;
  if (sscanf(spec, "%255[^: ]:%d%n", file, &line, &used) < 2 || line <= 0) {
    line = 0;
    if (sscanf(spec, "%d%n", &line, &used) == 1 && line > 0 && here && here[0]) {
      snprintf(file, sizeof file, "%s", here);
    } else {
      free(b);
      if (lab_ctl_rank() == 0) fprintf(st.out, "usage: b file:line [condition], or b line [condition] in this file\n");
      return;
    }
  }
  b->temporary = temporary;
  const char *cond = spec + used;
  while (*cond == ' ') cond++;
  b->id = ++st.next_bp;
  snprintf(b->file, sizeof b->file, "%s", file);
  b->line = line;
  snprintf(b->cond, sizeof b->cond, "%s", cond);
  b->next = st.bps;
  st.bps = b;
  if (lab_ctl_rank() == 0)
    fprintf(st.out, "%sbreakpoint %d at %s:%d%s%s\n", temporary ? "temporary " : "", b->id, file, line,
            cond[0] ? " if " : "", cond);
}

static void delete_breakpoints(const char *arg) {
  int id = atoi(arg), gone = 0;
  for (breakpoint **p = &st.bps; *p;) {
    if (id == 0 || (*p)->id == id) {
      breakpoint *b = *p;
      *p = b->next;
      free(b);
      gone++;
    } else {
      p = &(*p)->next;
    }
  }
  if (lab_ctl_rank() != 0) return;
  if (id == 0) fprintf(st.out, "deleted %d breakpoint%s\n", gone, gone == 1 ? "" : "s");
  else if (gone) fprintf(st.out, "deleted breakpoint %d\n", id);
  else fprintf(st.out, "no breakpoint %d\n", id);
}

/* every breakpoint goes, and numbers start at 1 again (a new :step session) */
static void reset_breakpoints(void) {
  while (st.bps) {
    breakpoint *b = st.bps;
    st.bps = b->next;
    free(b);
  }
  st.next_bp = 0;
}

static void line_hook(lua_State *L, lua_Debug *ar);

/* Every rank: one pause. `where` describes a rank paused inside a collective wait. */
static void pause_protocol(lua_State *L, const char *where) {
  lab_board_raise_pause();
  if (st.own_capture && st.capturing) { /* what the script printed since the last pause */
    int64_t len = 0;
    char *text = capture_end(&st.cap, &len);
    st.capturing = 0;
    show_from_all(text);
    free(text);
  } else {
    show_from_all(NULL);
  }
  lua_Debug ar;
  char pos[1024] = "(finished)";
  /* in the line hook level 0 is the paused function; inside a collective's wait level 0
   * is the C function and the Lua caller is level 1 */
  int level = where ? 1 : 0;
  int frame = lua_getstack(L, level, &ar) && lua_getinfo(L, "Sln", &ar);
  if (frame) {
    char text[512];
    source_line(ar.source, ar.currentline, text, sizeof text);
    snprintf(pos, sizeof pos, "%s:%d%s%s  %s%s%s", ar.short_src, ar.currentline, ar.name ? " in " : "",
             ar.name ? ar.name : "", text, where ? "   <- " : "", where ? where : "");
  } else if (where) {
    snprintf(pos, sizeof pos, "%s", where);
  }
  strcat(pos, "\n");
  char here[256] = ""; /* the paused file, for b LINE */
  if (frame) snprintf(here, sizeof here, "%s", ar.short_src);
  lab_board_set(LAB_PAUSED, "", "");
  show_from_all(pos);
  for (;;) {
    char *cmd = NULL;
    int64_t len = 0;
    if (lab_ctl_rank() == 0) {
      char *line = st.read_line ? st.read_line("(step) ") : NULL;
      cmd = line ? line : strdup("q");
      len = (int64_t)strlen(cmd);
    }
    lab_ctl_bcast(&cmd, &len);
    int depth = stack_depth(L) - 1;
    int resume = 1;
    if (strcmp(cmd, "n") == 0 || strcmp(cmd, "next") == 0 || cmd[0] == 0) {
      st.mode = MODE_OVER;
      st.target_depth = depth;
    } else if (strcmp(cmd, "s") == 0 || strcmp(cmd, "step") == 0) {
      st.mode = MODE_INTO;
    } else if (strcmp(cmd, "finish") == 0) {
      st.mode = MODE_FINISH;
      st.target_depth = depth;
    } else if (strcmp(cmd, "c") == 0 || strcmp(cmd, "continue") == 0) {
      st.mode = MODE_CONTINUE;
    } else if (strcmp(cmd, "q") == 0 || strcmp(cmd, "quit") == 0) {
      st.mode = MODE_QUIT;
    } else {
      resume = 0;
      if (strncmp(cmd, "b ", 2) == 0 || strncmp(cmd, "break ", 6) == 0) add_breakpoint(strchr(cmd, ' '), here, 0);
      else if (strncmp(cmd, "tbreak ", 7) == 0) add_breakpoint(cmd + 7, here, 1);
      else if (strncmp(cmd, "delete", 6) == 0 && (cmd[6] == 0 || cmd[6] == ' ')) delete_breakpoints(cmd + 6);
      else if (strcmp(cmd, "bt") == 0 || strcmp(cmd, "locals") == 0 || strcmp(cmd, "l") == 0 ||
               strcmp(cmd, "list") == 0 || strncmp(cmd, "l ", 2) == 0 || strncmp(cmd, "p ", 2) == 0) {
        char *a = answer(L, cmd, level);
        show_from_all(a);
        free(a);
      } else if (lab_ctl_rank() == 0) {
        if (strcmp(cmd, "h") != 0 && strcmp(cmd, "help") != 0) fprintf(st.out, "unknown command '%s'. ", cmd);
        fprintf(st.out, "commands: n s finish c b [file:]line [cond] tbreak delete [n] l [N] bt locals p expr q\n");
      }
      if (lab_ctl_rank() == 0) fflush(st.out);
    }
    free(cmd);
    if (resume) break;
  }
  /* every rank has answered this pause: the epoch as it is now is served (all are here) */
  int epoch = lab_board_pause_epoch(), agreed = 0;
  lab_ctl_max(epoch, &agreed, 0);
  lab_board_set_served(agreed);
  lab_board_set(LAB_RUNNING, "", "");
  if (st.own_capture) st.capturing = capture_begin(&st.cap) == 0;
  if (st.mode == MODE_QUIT) {
    lua_sethook(L, NULL, 0, 0);
    if (!where) luaL_error(L, "stepper: quit");
  } else if (!st.active && st.mode != MODE_CONTINUE) {
    /* a rank that joined the pause from the REPL's hook or a wait steps from now on too */
    st.active = 1;
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
  }
}

/* evaluates cond in the frame at level (its locals and upvalues, globals behind them) */
static int condition_holds(lua_State *L, int level, const char *cond) {
  char *cmd = NULL;
  if (asprintf(&cmd, "p %s", cond) < 0) return 1;
  int top = lua_gettop(L);
  lua_Debug ar;
  int holds = 1;
  if (lua_getstack(L, level, &ar)) {
    char *answer_text = answer(L, cmd, level); /* the same evaluation as p */
    holds = answer_text && strncmp(answer_text, "error: ", 7) != 0 && strncmp(answer_text, "nil", 3) != 0 &&
            strncmp(answer_text, "false", 5) != 0;
    free(answer_text);
  }
  lua_settop(L, top);
  free(cmd);
  return holds;
}

static int breakpoint_hit(lua_State *L, lua_Debug *ar) {
  for (breakpoint **p = &st.bps; *p; p = &(*p)->next) {
    breakpoint *b = *p;
    if (b->line != ar->currentline) continue;
    size_t fl = strlen(b->file), sl = strlen(ar->short_src);
    if (sl < fl || strcmp(ar->short_src + sl - fl, b->file) != 0) continue;
    if (b->cond[0] && !condition_holds(L, 0, b->cond)) continue;
    if (b->temporary) {
      *p = b->next;
      free(b);
    }
    return 1;
  }
  return 0;
}

static void line_hook(lua_State *L, lua_Debug *ar) {
  if (ar->event != LUA_HOOKLINE) return;
  if (lab_board_interrupt_requested()) {
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
  }
  if (!lua_getinfo(L, "Sl", ar) || ar->currentline <= 0) return;
  /* Another rank stopped. This one goes on for a moment so that it can reach the same place
   * itself (a breakpoint, the end of `finish`, the next line of `n`): SPMD code then stops once
   * with every rank there. Ranks that wait in a collective or are done join from there; one
   * that is elsewhere stops at its next line after the grace. */
  static double pending_since;
  int pending = lab_board_pause_pending();
  if (!pending) pending_since = 0;
  else if (pending_since == 0) pending_since = lab_now();
  /* s stops in the user's code, not inside the library (lua/lab/...), as pdb skips its own;
   * a rank joining another's stop also waits until it is back in the user's code */
  int in_library = strstr(ar->source, "/lua/lab/") != NULL;
  int pause = pending && lab_now() - pending_since > PAUSE_GRACE_S && !in_library;
  switch (st.mode) {
  case MODE_INTO: pause = pause || !in_library; break;
  case MODE_OVER: pause = pause || stack_depth(L) - 1 <= st.target_depth; break;
  case MODE_FINISH: pause = pause || stack_depth(L) - 1 < st.target_depth; break;
  case MODE_CONTINUE: pause = pause || breakpoint_hit(L, ar); break;
  default: break;
  }
  if (pause) pause_protocol(L, NULL);
}

static void answer_pauses_when_done(void) {
  if (lab_board_pause_pending() && st.mode != MODE_QUIT) pause_protocol(st.L, "(finished the script)");
}

/* a rank waiting in a collective joins the pause; after q it stops waiting */
static int wait_handler(const char *where) {
  if (!st.L) return 0;
  pause_protocol(st.L, where);
  return st.mode == MODE_QUIT;
}

void stepper_arm(lua_State *L) {
  st.L = L;
  st.mode = MODE_CONTINUE;
  lab_board_set_pause_handler(wait_handler);
}

void stepper_disarm(void) {
  if (st.L) lua_sethook(st.L, NULL, 0, 0);
  st.active = 0;
  st.mode = MODE_CONTINUE;
  st.L = NULL;
  lab_board_set_pause_handler(NULL);
}

void stepper_pause_if_asked(lua_State *L) {
  if (st.L && lab_board_pause_pending()) pause_protocol(L, NULL);
}

void stepper_answer_pauses(void) {
  if (st.L && lab_board_pause_pending() && st.mode != MODE_QUIT) pause_protocol(st.L, "(finished the chunk)");
}

/* lab.breakpoint(): every rank that calls it stops here (the others at their next line) */
static int l_breakpoint(lua_State *L) {
  if (!st.read_line) repl_attach_terminal(L); /* a plain script: rank 0 takes the terminal now */
  if (!st.active) {
    st.active = 1;
    st.L = L;
    lab_board_set_pause_handler(wait_handler);
    lab_dist_set_guarded(1);
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
  }
  st.mode = MODE_INTO; /* stop at the next line of the caller */
  return 0;
}

void stepper_register(lua_State *L) {
  lua_getglobal(L, "lab");
  lua_pushcfunction(L, l_breakpoint);
  lua_setfield(L, -2, "breakpoint");
  lua_pop(L, 1);
}

/* splits "file a b" into arg and returns the file (malloc'ed) */
static char *set_args(lua_State *L, const char *cmdline) {
  char *copy = strdup(cmdline);
  char *save = NULL, *tok = strtok_r(copy, " \t", &save);
  char *file = tok ? strdup(tok) : NULL;
  lua_newtable(L);
  if (file) {
    lua_pushstring(L, file);
    lua_rawseti(L, -2, 0);
  }
  int i = 1;
  while ((tok = strtok_r(NULL, " \t", &save))) {
    lua_pushstring(L, tok);
    lua_rawseti(L, -2, i++);
  }
  lua_setglobal(L, "arg");
  free(copy);
  return file;
}

int stepper_run_script(lua_State *L, const char *cmdline, int stepping, char **err) {
  char *file = set_args(L, cmdline);
  if (!file) {
    *err = strdup("give a script: :run file.lua [args]");
    return -1;
  }
  if (stepping) {
    st.active = 1;
    st.L = L;
    st.mode = MODE_INTO;
    lab_board_set_pause_handler(wait_handler);
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
    st.own_capture = 1;
    st.capturing = capture_begin(&st.cap) == 0;
  }
  int rc = session_run_file(L, file, err);
  if (stepping) {
    lua_sethook(L, NULL, 0, 0);
    /* a rank that is done still answers pauses of the others until all are done */
    lab_ctl_wait_all_done(answer_pauses_when_done);
    if (st.capturing) { /* shown grouped by stepper_session */
      int64_t len;
      free(st.tail);
      st.tail = capture_end(&st.cap, &len);
      st.capturing = 0;
    }
    st.active = 0;
    st.own_capture = 0;
    lab_board_set_pause_handler(NULL);
  }
  free(file);
  return rc;
}

void stepper_session(lua_State *L, const char *cmdline, FILE *out) {
  st.out = out;
  reset_breakpoints();
  char *err = NULL;
  capture cap;
  int captured = 0;
  lab_dist_set_guarded(1);
  int rc = stepper_run_script(L, cmdline, 1, &err);
  (void)captured;
  (void)cap;
  show_from_all(st.tail);
  free(st.tail);
  st.tail = NULL;
  /* every rank's outcome */
  char line[2048];
  if (rc < 0) {
    char head[32];
    int hl = snprintf(head, sizeof head, "rank %d: ", lab_ctl_rank());
    const char *msg = strncmp(err, head, (size_t)hl) == 0 ? err + hl : err;
    const char *nl = strchr(msg, '\n');
    snprintf(line, sizeof line, "%s: %.*s\n", strstr(msg, "stepper: quit") ? "stopped" : "error",
             nl ? (int)(nl - msg) : (int)strlen(msg), msg);
  } else {
    snprintf(line, sizeof line, "finished\n");
  }
  show_from_all(line);
  if (lab_ctl_rank() == 0) fflush(st.out);
  free(err);
}
