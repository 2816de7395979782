/* Driving llmlab through a pseudo-terminal, as a person would: spawn, type, read the screen. */
#ifndef LAB_TESTS_REPL_PTY_H
#define LAB_TESTS_REPL_PTY_H

#include <stddef.h>
#include <sys/types.h>
#include <termios.h>

typedef struct {
  pid_t pid;
  int fd;
  char buf[1 << 17];
  size_t len;
  size_t mark; /* expect() searches from here */
  struct termios modes; /* the terminal's modes when the session ended (finish) */
  int have_modes;
} session;

extern const char *llmlab_path;
extern char home_dir[256];

double pty_now(void);
void spawn(session *s, char *const argv[]);
/* Reads until `text` appears after the mark (then moves the mark past it); 1 if it did. */
int expect(session *s, const char *text, double timeout);
/* expect() of a printf-formatted text */
int expectf(session *s, double timeout, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* how many times text occurs on the screen after the mark (the mark stays) */
int occurrences(session *s, const char *text);
void type(session *s, const char *keys);
/* Reads what arrives within timeout seconds, quietly. */
void pump(session *s, double timeout);
/* Waits for the process to exit; returns its status, or -1 after killing it. */
int finish(session *s, double timeout);
/* Ctrl-T (every rank's state) until the board shows `state` (e.g. "rank 0: idle") while rank
 * `busy` still runs Lua (its traceback closes each answer), every 0.2 s for up to timeout
 * seconds; 1 if shown. How a test learns that a rank gave up its wait, without a fixed sleep. */
int board_shows(session *s, const char *state, int busy, double timeout);
/* spawn llmlab -n N and wait for the prompt */
void start_ranks(session *s, const char *n);
/* writes text to a new file at path (a script a test runs) */
void write_text_file(const char *path, const char *text);
/* common set-up from main's argv */
void pty_setup(int argc, char **argv);

#endif
