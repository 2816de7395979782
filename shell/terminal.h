/* Rank 0's terminal. Under mpirun, rank 0's stdin is a pipe from mpirun, so the REPL finds
 * the terminal mpirun itself reads (its parent's stdin) and talks to it directly: readline
 * editing and history work, and prompts are not held back by mpirun's line buffering.
 * Without a terminal (input piped in) lines are read from stdin without prompts. */
#ifndef LAB_SHELL_TERMINAL_H
#define LAB_SHELL_TERMINAL_H

#include <stdio.h>
#include <sys/types.h>

typedef struct {
  FILE *in, *out;   /* where lines come from and where the REPL writes */
  int interactive;  /* a terminal: prompts, readline, history */
  int fd;           /* the opened terminal, or -1 */
  pid_t saved_fg;   /* foreground group to give back at exit, or -1 */
} terminal;

void terminal_open(terminal *t);
void terminal_close(terminal *t);
/* A line without its newline (malloc'ed), or NULL at end of input. */
char *terminal_readline(terminal *t, const char *prompt);
void terminal_add_history(terminal *t, const char *line);

#endif
