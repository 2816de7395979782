/* The ranks a chunk goes to and their group: "all" or a rank list ("1,3", "0-2"). */
#ifndef LAB_SHELL_TARGETS_H
#define LAB_SHELL_TARGETS_H

#include <stddef.h>

#include "runtime/lab.h"

/* Fills member[] (n entries, the world's size); -1 with a message in err for a bad spec. */
int parse_ranks(const char *spec, int *member, int n, char *err, size_t errn);
/* The rank list at p (spaces allowed around ',' and '-'), copied without spaces into spec;
 * returns where the code after it starts, or NULL when no list is there. */
const char *split_rank_list(const char *p, char *spec, size_t n);
/* the group of the ranks spec names, made once per spec by every rank together (in_target:
 * this rank is one of them) */
lab_group *target_group_for(const char *spec, int in_target);
/* after recovery gave up on a group: every rank forgets every target group */
void forget_targets(void);

#endif
