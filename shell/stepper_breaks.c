/* The stepper's breakpoints: a file:line, an optional condition evaluated in the frame, and
 * tbreak's that go when first hit (see stepper_state.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepper_frames.h"
#include "stepper_state.h"

typedef struct breakpoint {
  int id;
  char file[256];
  int line;
  char cond[256];
  int temporary; /* tbreak: deleted when first hit */
  struct breakpoint *next;
} breakpoint;

static breakpoint *bps;
static int next_bp;

/* b file:line [cond], or b line [cond] in the file of the selected frame (here) */
void breaks_add(const char *spec, const char *here, int temporary) {
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
      stepper_say("usage: b file:line [condition], or b line [condition] in this file\n");
      return;
    }
  }
  b->temporary = temporary;
  const char *cond = spec + used;
  while (*cond == ' ') cond++;
  b->id = ++next_bp;
  snprintf(b->file, sizeof b->file, "%s", file);
  b->line = line;
  snprintf(b->cond, sizeof b->cond, "%s", cond);
  b->next = bps;
  bps = b;
  stepper_say("%sbreakpoint %d at %s:%d%s%s\n", temporary ? "temporary " : "", b->id, file, line, cond[0] ? " if " : "", cond);
}

void breaks_list(void) {
  if (!bps) stepper_say("no breakpoints\n");
  for (int id = 1; id <= next_bp; id++) /* in the order they were set */
    for (breakpoint *b = bps; b; b = b->next)
      if (b->id == id)
        stepper_say("%sbreakpoint %d at %s:%d%s%s\n", b->temporary ? "temporary " : "", b->id, b->file, b->line,
            b->cond[0] ? " if " : "", b->cond);
}

void breaks_delete(const char *arg) {
  int id = atoi(arg), gone = 0;
  for (breakpoint **p = &bps; *p;) {
    if (id == 0 || (*p)->id == id) {
      breakpoint *b = *p;
      *p = b->next;
      free(b);
      gone++;
    } else {
      p = &(*p)->next;
    }
  }
  if (id == 0) stepper_say("deleted %d breakpoint%s\n", gone, gone == 1 ? "" : "s");
  else if (gone) stepper_say("deleted breakpoint %d\n", id);
  else stepper_say("no breakpoint %d\n", id);
}

/* every breakpoint goes, and numbers start at 1 again (a new :step session) */
void breaks_reset(void) {
  while (bps) {
    breakpoint *b = bps;
    bps = b->next;
    free(b);
  }
  next_bp = 0;
}

/* evaluates cond in the frame at level (its locals and upvalues, globals behind them) */
static int condition_holds(lua_State *L, int level, const char *cond) {
  int ok = 0;
  char *v = frame_eval(L, level, cond, NULL, &ok); /* the same evaluation as p */
  int holds = !v || (ok && strncmp(v, "nil", 3) != 0 && strncmp(v, "false", 5) != 0);
  free(v);
  return holds;
}

int breaks_hit(lua_State *L, lua_Debug *ar) {
  for (breakpoint **p = &bps; *p; p = &(*p)->next) {
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
