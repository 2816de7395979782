/* Splitting a command line (:run file "x y" z) into words, with quotes as a shell has them. */
#ifndef LAB_SHELL_WORDS_H
#define LAB_SHELL_WORDS_H

/* The next word of *p (malloc'ed), *p moved past it; NULL when none is left. Words break at
 * spaces and tabs; "..." and '...' keep spaces (and quote each other); a backslash in or out
 * of double quotes keeps the next character. */
char *next_word(const char **p);

#endif
