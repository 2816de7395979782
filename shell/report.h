/* After a chunk: every rank's output and error, brought to rank 0 and shown grouped. */
#ifndef LAB_SHELL_REPORT_H
#define LAB_SHELL_REPORT_H

#include <stdio.h>

/* Every rank calls it; rank 0 writes to `to`. Output already shown live is left out; errors
 * a rank raised itself come first (with their traceback when other ranks' waits followed from
 * them), then the waits given up because of them (fail fast). */
void report_all(FILE *to, const char *out, long long out_len, const char *err);

/* "rank N: msg" whatever form msg had (errors raised by lab already carry it). */
char *with_rank_prefix(int rank, const char *msg);

#endif
