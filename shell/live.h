/* Live output: while a chunk runs, rank 0 shows the lines every rank on its node has printed
 * so far (read from each rank's capture file through /proc/<pid>/fd, as the board says where),
 * labelled and grouped, once the chunk has run for 0.1 s (a line waits up to 1 s for the other
 * ranks to print theirs, so that lines alike show once, as [0-3] ...); short chunks keep the
 * compact grouping of the report at the end, which then leaves out what was already shown. */
#ifndef LAB_SHELL_LIVE_H
#define LAB_SHELL_LIVE_H

#include <stdint.h>
#include <stdio.h>

/* targeted[r]: rank r runs the chunk (its lines are waited for); NULL: every rank */
void live_begin(int world_size, const int *targeted);
/* called every ~0.1 s by rank 0's watcher thread */
void live_poll(FILE *out);
/* bytes of world rank r's output already shown (0 outside a chunk) */
int64_t live_shown(int r);
/* after the report: forget the chunk */
void live_end(void);

#endif
