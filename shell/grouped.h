/* Grouped output: what each rank printed, merged for display on rank 0. Ranks whose text
 * is identical are shown once, prefixed with their rank set ("[0-3] 10.0"); "rank R" naming a
 * rank's own number reads "rank «N»", so texts that differ only there fold into one block;
 * texts of several lines, at least half of them alike on every rank, are shown line by line,
 * a differing line per group with the differing part between « and »; other differing text
 * is shown per group in order of the lowest rank. */
#ifndef LAB_SHELL_GROUPED_H
#define LAB_SHELL_GROUPED_H

#include <stdint.h>
#include <stdio.h>

/* "0-3", "0,2", "0-1,3" for the ranks whose flag is set */
void rank_set_str(const int *member, int n, char *buf, size_t size);

/* Writes the texts of n ranks to out. With prefix off (a world of 1) the text is written
 * as is. Texts may lack a final newline; one is added. */
void print_grouped(FILE *out, int n, const char *const *texts, const int64_t *lens, int prefix);

/* Every rank calls it with its own text (NULL: nothing): rank 0 gathers them all and writes
 * them grouped to out, as print_grouped does. */
void print_from_all(FILE *out, const char *mine, int64_t len, int prefix);
/* print_grouped of n texts laid end to end in all (as lab_ctl_gather returns them) */
void print_gathered(FILE *out, int n, const char *all, const int64_t *lens, int prefix);

#endif
