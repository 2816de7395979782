/* A script under the stepper (:step, --step, and :run's plain run): its `arg`, its
 * post-mortem (a rank whose code raises stops where it failed, as pdb's) and every rank's
 * outcome (see stepper.h). */
#define _GNU_SOURCE
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/lab_control.h"
#include "session.h"
#include "stepper.h"
#include "stepper_state.h"
#include "words.h"

/* splits `file a "b c"` into arg (quotes as a shell's, shell/words.c) and returns the file */
static char *set_args(lua_State *L, const char *cmdline) {
  const char *p = cmdline;
  char *file = next_word(&p), *word;
  lua_newtable(L);
  if (file) {
    lua_pushstring(L, file);
    lua_rawseti(L, -2, 0);
  }
  for (int i = 1; file && (word = next_word(&p)); i++) {
    lua_pushstring(L, word);
    lua_rawseti(L, -2, i);
    free(word);
  }
  lua_setglobal(L, "arg");
  return file;
}

/* The message handler of a stepped script: a rank whose code raises an error stops there
 * (post-mortem, as pdb's), with the stack intact, so p, locals, bt and up show how it got
 * there; every other rank joins the pause (from its wait, its next line, or its end). Any
 * resuming command lets the error go on; then the ranks waiting for this one give up at once. */
static int post_mortem_handler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
    else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  msg = session_locate(L, msg, 1); /* the user's line, on every rank (not the library's, nor none) */
  /* not for an error that follows from another rank's (a wait given up for it: fail fast) */
  if (st.active && st.mode != MODE_QUIT && !lab_board_gave_up_for_member() && !strstr(msg, "stepper: quit") &&
      !strstr(msg, "interrupted!")) {
    /* the user's frame nearest the error (not error(), nor the library's lua/lab/ that raised
     * it for the user's call), else the first Lua frame above this handler */
    int level = 1, user = 0;
    lua_Debug ar;
    while (lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar) && strcmp(ar.what, "C") == 0) level++;
    for (int l = level; !user && lua_getstack(L, l, &ar) && lua_getinfo(L, "S", &ar); l++)
      if (strcmp(ar.what, "C") != 0 && !strstr(ar.source, "/lua/lab/")) user = l;
    if (user) level = user;
    char where[512], head[32];
    int hl = snprintf(head, sizeof head, "rank %d: ", lab_ctl_rank()); /* the label names the rank */
    snprintf(where, sizeof where, "post-mortem: %s", strncmp(msg, head, (size_t)hl) == 0 ? msg + hl : msg);
    lua_sethook(L, NULL, 0, 0);
    st.mode = MODE_INTO;
    stepper_pause_at(L, level, where, 0);
    st.active = 0; /* whatever was typed, the error goes on: no more stops on this rank */
    lua_sethook(L, NULL, 0, 0);
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static int run_stepped_file(lua_State *L, const char *path, char **err) {
  int status = luaL_loadfile(L, path);
  if (status == LUA_OK) {
    lua_pushcfunction(L, post_mortem_handler);
    lua_insert(L, -2);
    status = lua_pcall(L, 0, 0, -2);
    if (status == LUA_OK) lua_pop(L, 1);
  }
  if (status != LUA_OK) {
    const char *m = lua_tostring(L, -1);
    *err = strdup(m ? m : "(no message)");
    lua_pop(L, status == LUA_ERRSYNTAX || status == LUA_ERRFILE ? 1 : 2);
    return -1;
  }
  return 0;
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
    st.skip_lib = 1;
    lab_board_set_pause_handler(stepper_wait_handler);
    lua_sethook(L, stepper_line_hook, LUA_MASKLINE, 0);
    st.own_capture = 1;
    st.capturing = capture_begin(&st.cap) == 0;
  }
  int rc = stepping ? run_stepped_file(L, file, err) : session_run_file(L, file, err);
  if (stepping) {
    lua_sethook(L, NULL, 0, 0);
    lab_board_set(LAB_IDLE, "", ""); /* done: the board says so, and waits for it end at once */
    lab_board_end_chunk(rc < 0);
    /* a rank that is done still answers pauses of the others until all are done */
    lab_ctl_wait_all_done(stepper_answer_pauses_script);
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

int stepper_session(lua_State *L, const char *cmdline, FILE *out) {
  st.out = out;
  session_reset_interrupt();
  breaks_reset();
  stepper_reset_displays();
  char *err = NULL;
  lab_dist_set_guarded(1);
  lab_board_begin_chunk();
  int rc = stepper_run_script(L, cmdline, 1, &err);
  stepper_show_all(st.tail);
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
  /* a rank's own error first, then the waits given up because of it (fail fast) */
  int followed = rc < 0 && lab_board_gave_up_for_member();
  stepper_show_all(followed ? NULL : line);
  stepper_show_all(followed ? line : NULL);
  if (lab_ctl_rank() == 0) fflush(st.out);
  free(err);
  return rc;
}
