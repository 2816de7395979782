/* Rank 0's keyboard while a chunk runs: a thread reads the terminal (Ctrl-C, Ctrl-T, keys
 * typed ahead for readline) and prints the watchdog's reports and the live output. */
#ifndef LAB_SHELL_WATCH_H
#define LAB_SHELL_WATCH_H

#include <stdio.h>

#include "terminal.h"

/* the terminal it reads and writes (rank 0's) */
void watch_init(terminal *t);
/* rank 0 with a relayed terminal: start / stop the thread (others: nothing) */
void watch_start(void);
void watch_stop(void);
int watch_active(void);
/* while a chunk runs, SIGINT interrupts it; otherwise it clears the line being read */
void watch_set_running(int on);
void watch_on_sigint(int sig);
/* readline's getc: the keys typed while a chunk ran come first */
int watch_getc(FILE *f);

#endif
