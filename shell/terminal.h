/* Rank 0's terminal. Under mpirun, rank 0's stdin is a pipe that mpirun feeds from the
 * terminal it owns, and rank 0's stdout goes through mpirun's line buffering. So the REPL
 * finds that terminal (mpirun's stdin), puts it in raw mode while reading a line, lets
 * readline take the keystrokes mpirun relays through the pipe, and draws prompts and
 * output on the terminal directly. mpirun stays the foreground job and never competes
 * for input; Ctrl-C arrives as a byte, not as a signal mpirun would turn into a kill.
 * Without any terminal (input piped in) lines are read from stdin without prompts. */
#ifndef LAB_SHELL_TERMINAL_H
#define LAB_SHELL_TERMINAL_H

#include <stdio.h>

typedef struct {
  FILE *in, *out;   /* where keystrokes or lines come from, and where the REPL writes */
  int interactive;  /* a terminal: prompts, readline, history */
  int relayed;      /* keystrokes arrive through mpirun's pipe, the terminal is tty_fd */
  int tty_fd;       /* the terminal opened for drawing and modes, or -1 */
  volatile int interrupted; /* Ctrl-C at a prompt since the last terminal_take_interrupt */
} terminal;

void terminal_open(terminal *t);
void terminal_close(terminal *t);
/* A line without its newline (malloc'ed), or NULL at end of input. */
char *terminal_readline(terminal *t, const char *prompt);
void terminal_add_history(terminal *t, const char *line);
/* The key modes for while a chunk runs (relayed terminals): raw, no signals. */
void terminal_run_mode(terminal *t);
/* Ctrl-C at the prompt: drop the line being edited and end the read with an empty line; the
 * reader asks terminal_take_interrupt (1 once after each Ctrl-C) to drop a pending chunk too. */
void terminal_interrupt_line(terminal *t);
int terminal_take_interrupt(terminal *t);

#endif
