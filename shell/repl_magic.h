/* The REPL's IPython-style commands, read on rank 0 and turned into chunks every targeted
 * rank runs: ?f and f? (help), :time code, :timeit code, :tb. */
#ifndef LAB_SHELL_REPL_MAGIC_H
#define LAB_SHELL_REPL_MAGIC_H

#include <stdio.h>

/* When line is one of these commands: sets *handled and returns the message to broadcast
 * ('C' target '\n' chunk), or NULL after printing a usage error to out. Otherwise leaves
 * *handled 0 and returns NULL. */
char *magic_message(const char *line, const char *target, FILE *out, int *handled);

#endif
