/* all_to_all_single with split sizes (dist.h): the uneven all-to-all along dim 1, its splits
 * checked on this rank and, in checked mode, against every other rank's. */
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "check.h"
#include "dist.h"
#include "held.h"
#include "stage.h"
#include "work.h"

/* the splits of one side: one per rank, none negative, summing to the tensor's dim 1 */
static int splits_check(const char *op, lab_group *g, const int64_t *splits, lab_tensor *t, const char *what) {
  char s[128];
  int64_t sum = 0;
  for (int r = 0; r < g->size; r++) {
    if (splits[r] < 0)
      return lab_fail(op, "%s_split_sizes[%d] is %lld: split sizes cannot be negative", what, r + 1, (long long)splits[r]);
    sum += splits[r];
  }
  if (sum != t->shape[0])
    return lab_fail(op, "%s_split_sizes sum to %lld but the %s tensor %s has %lld rows (dim 1)", what,
                    (long long)sum, what, lab_shape_str(t, s, sizeof s), (long long)t->shape[0]);
  return 0;
}

/* Checked mode: every rank shows its splits; what rank i sends to j must be what j expects
 * from i, else MPI would truncate a message or leave rows unwritten. */
static int splits_agree(const char *op, lab_group *g, const int64_t *in_splits, const int64_t *out_splits) {
  int n = g->size;
  int64_t *mine = malloc(sizeof(int64_t) * 2 * (size_t)n), *all = malloc(sizeof(int64_t) * 2 * (size_t)n * (size_t)n);
  if (!mine || !all) {
    free(mine);
    free(all);
    return lab_fail(op, "out of memory");
  }
  memcpy(mine, in_splits, sizeof(int64_t) * (size_t)n);
  memcpy(mine + n, out_splits, sizeof(int64_t) * (size_t)n);
  int rc = lab_coll_exchange(g, mine, all, (int)(sizeof(int64_t) * 2 * (size_t)n));
  if (rc == -2) {
    lab_dist_hold_memory(mine);
    lab_dist_hold_memory(all);
    return -1;
  }
  for (int i = 0; rc == 0 && i < n; i++)
    for (int j = 0; rc == 0 && j < n; j++) {
      int64_t sends = all[(size_t)i * 2 * n + j], expects = all[(size_t)j * 2 * n + n + i];
      if (sends != expects)
        rc = lab_fail(op, "on %s, rank %d sends %lld rows to rank %d (its input_split_sizes[%d]) but rank %d "
                      "expects %lld rows from rank %d (its output_split_sizes[%d])", g->name, g->world_ranks[i],
                      (long long)sends, g->world_ranks[j], j + 1, g->world_ranks[j], (long long)expects,
                      g->world_ranks[i], i + 1);
    }
  free(mine);
  free(all);
  return rc;
}

/* one side's splits: given, or an even split of the tensor's rows (which must divide) */
static int splits_of(const char *op, lab_group *g, const int64_t *given, lab_tensor *t, const char *what, int64_t *s) {
  char a[128];
  int n = g->size;
  if (!given && t->shape[0] % n)
    return lab_fail(op, "%s %s has %lld rows, which do not split evenly over %d ranks; pass %s_split_sizes", what,
                    lab_shape_str(t, a, sizeof a), (long long)t->shape[0], n, what);
  for (int r = 0; r < n; r++) s[r] = given ? given[r] : t->shape[0] / n;
  return splits_check(op, g, s, t, what);
}

static int all_to_all_single(lab_group *g, lab_tensor *out, lab_tensor *in, const lab_coll_args *a, lab_work **work) {
  const char *name = "all_to_all_single";
  char s[128], t[128];
  if (lab_coll_member_check(name, g) < 0) return -1;
  if (!g->backend->collective && !g->backend->all_to_all_v)
    return lab_fail(name, "the %s backend of %s has no uneven all-to-all", g->backend->name, g->name);
  lab_coll_path path;
  if (lab_coll_route(name, g, out, in, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, out, in, 1, 0, all_to_all_single, a, work);
  if (in->ndim < 1 || out->ndim < 1 || in->dtype != out->dtype || in->ndim != out->ndim ||
      memcmp(in->shape + 1, out->shape + 1, sizeof(int64_t) * (size_t)(in->ndim - 1)) != 0)
    return lab_fail(name, "output %s %s and input %s %s must have the same dtype and the same sizes "
                    "except dim 1", lab_shape_str(out, s, sizeof s), lab_dtype_name(out->dtype),
                    lab_shape_str(in, t, sizeof t), lab_dtype_name(in->dtype));
  if (lab_coll_contiguous_check(name, "input", in) < 0 || lab_coll_contiguous_check(name, "output", out) < 0) return -1;
  int n = g->size;
  int64_t row = 1; /* elements per row */
  for (int d = 1; d < in->ndim; d++) row *= in->shape[d];
  int64_t *v = malloc(sizeof(int64_t) * 6 * (size_t)n); /* splits, then counts and displacements */
  if (!v) return lab_fail(name, "out of memory");
  int64_t *is = v, *os = v + n, *sc = v + 2 * n, *sd = v + 3 * n, *rc_ = v + 4 * n, *rd = v + 5 * n;
  if (splits_of(name, g, a->in_splits, in, "input", is) < 0 || splits_of(name, g, a->out_splits, out, "output", os) < 0) {
    free(v);
    return -1;
  }
  int64_t off_in = 0, off_out = 0, wire = 0;
  for (int r = 0; r < n; r++) {
    sc[r] = is[r] * row;
    sd[r] = off_in;
    off_in += sc[r];
    rc_[r] = os[r] * row;
    rd[r] = off_out;
    off_out += rc_[r];
    if (r != g->rank) wire += sc[r];
  }
  lab_coll_set_activity(name, in, g);
  if (lab_coll_agree(g, LAB_OP_ALL_TO_ALL_SINGLE, in->dtype, row, -1, -1) < 0 ||
      (lab_dist_checked() && splits_agree(name, g, is, os) < 0)) {
    free(v);
    return -1;
  }
  /* bytes: what this rank passed in; wire: what leaves this rank (its own block stays) */
  size_t esz = lab_dtype_size(in->dtype);
  lab_coll_count(g, LAB_OP_ALL_TO_ALL_SINGLE, (int64_t)lab_nbytes(in), lab_nbytes(in) ? (double)(wire * (int64_t)esz) / (double)lab_nbytes(in) : 0);
  lab_group *bg = lab_coll_backend_group(g, path);
  int rc = bg ? lab_coll_launch(bg, work, out, in, 0,
                                (lab_coll_call){LAB_OP_ALL_TO_ALL_SINGLE, NULL, lab_data(in), lab_data(out), 0, in->dtype, -1,
                                                -1, 0, {sc, sd, rc_, rd}})
              : -1;
  free(v); /* the backend copied the counts it needs to keep */
  return rc;
}

int lab_all_to_all_single(lab_group *g, lab_tensor *out, const int64_t *out_splits, lab_tensor *in,
                          const int64_t *in_splits, lab_work **work) {
  return all_to_all_single(g, out, in, &(lab_coll_args){.out_splits = out_splits, .in_splits = in_splits}, work);
}
