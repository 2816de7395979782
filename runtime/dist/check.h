/* What every collective checks before it reaches the wire (check.c): the caller's arguments
 * (membership, contiguity, roots, reductions, sizes), each failure a lab_fail naming the op and
 * the values, and in checked mode the fingerprint every rank of the group compares. Private to
 * runtime/dist. */
#ifndef LAB_RUNTIME_DIST_CHECK_H
#define LAB_RUNTIME_DIST_CHECK_H

#include "dist.h"

/* Each returns 0, or -1 after lab_fail naming op. */
int lab_coll_member_check(const char *op, lab_group *g); /* also: refused, poisoned */
int lab_coll_contiguous_check(const char *op, const char *what, lab_tensor *t);
/* A root counts the group's ranks (0 .. size-1), as torch's group_src does; what: "src", "dst" */
int lab_coll_root_check(const char *op, lab_group *g, int root, const char *what);
int lab_coll_redop_check(const char *op, lab_tensor *t, lab_redop r);
/* big holds size x numel(small) elements of small's dtype, and both are contiguous */
int lab_coll_sized_pair_check(const char *op, lab_group *g, lab_tensor *big, const char *big_name, lab_tensor *small,
                              const char *small_name);

/* Checked mode (lab_dist_checked): every rank of g shows (op, dtype, count, redop, root) and
 * the call fails on every rank, with the same words, when they differ. 0 when not checked. */
int lab_coll_agree(lab_group *g, lab_coll_op op, lab_dtype dt, int64_t count, int redop, int root);
/* g's backend exchange of nbytes from each rank into all (the check channel): 0; -1 after
 * lab_fail; -2 after lab_fail when the wait was given up and its request left to recovery,
 * so that mine and all must be held (held.h) rather than freed. */
int lab_coll_exchange(lab_group *g, void *mine, void *all, int nbytes);

#endif
