/* The checks of check.h: arguments, and checked mode's fingerprints. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "held.h"
#include "work.h"

static int checked;

/* the names, from the lists in dist.h and comm.h */
#define NAME(e, name) name,
static const char *coll_names[LAB_NOPS] = {LAB_COLL_LIST(NAME)};
static const char *redop_names[LAB_NREDOPS] = {LAB_REDOP_LIST(NAME)};
#undef NAME

const char *lab_coll_name(lab_coll_op op) { return coll_names[op]; }
const char *lab_redop_name(lab_redop op) { return redop_names[op]; }

int lab_redop_from_name(const char *name) {
  for (int i = 0; i < LAB_NREDOPS; i++)
    if (strcmp(name, lab_redop_name((lab_redop)i)) == 0) return i;
  return -1;
}

void lab_dist_set_checked(int on) { checked = on; }
int lab_dist_checked(void) { return checked; }

int lab_coll_member_check(const char *op, lab_group *g) {
  if (lab_group_refusal(op) < 0) return -1;
  if (g->poisoned)
    return lab_fail(op, "%s is unusable: a collective on it was abandoned (interrupted, timed out or quit) while "
                    "other ranks were elsewhere; the REPL repairs it before the next chunk, and a group still "
                    "unusable after that must be created again", g->name);
  if (g->rank >= 0) return 0;
  return lab_fail(op, "this rank is not a member of %s", g->name);
}

int lab_coll_contiguous_check(const char *op, const char *what, lab_tensor *t) {
  if (lab_is_contiguous(t)) return 0;
  char s[128];
  return lab_fail(op, "%s tensor of shape %s is not contiguous; call :contiguous() first", what,
                  lab_shape_str(t, s, sizeof s));
}

/* A REPL chunk on some ranks (%on 1,3) runs on their group while rank() reports world ranks:
 * a world rank that is a member is named with its number in the group, so the message says
 * which to write. */
int lab_coll_root_check(const char *op, lab_group *g, int root, const char *what) {
  if (root >= 0 && root < g->size) return 0;
  for (int i = 0; g->world_ranks && i < g->size; i++)
    if (g->world_ranks[i] == root)
      return lab_fail(op, "%s %d is not a rank of %s (size %d): %s counts the group's ranks 0-%d, and world rank %d "
                      "is rank %d of the group (write %d)", what, root, g->name, g->size, what, g->size - 1, root, i, i);
  return lab_fail(op, "%s %d is not a rank of %s (size %d): %s counts the group's ranks, 0-%d", what, root, g->name,
                  g->size, what, g->size - 1);
}

int lab_coll_redop_check(const char *op, lab_tensor *t, lab_redop r) {
  /* NCCL reduces no FP8 type either; a sum rounded to 3 mantissa bits at every hop is useless */
  if (lab_dtype_is_fp8(t->dtype))
    return lab_fail(op, "%s tensors cannot be reduced (FP8 is a storage type): reduce in bf16 or f32, "
                        "or move them with broadcast/all_gather", lab_dtype_name(t->dtype));
  if (r == LAB_RED_AVG && !lab_dtype_is_float(t->dtype))
    return lab_fail(op, "op 'avg' needs a floating-point tensor, got %s", lab_dtype_name(t->dtype));
  return 0;
}

int lab_coll_sized_pair_check(const char *op, lab_group *g, lab_tensor *big, const char *big_name, lab_tensor *small,
                              const char *small_name) {
  char a[128], b[128];
  if (big->dtype != small->dtype)
    return lab_fail(op, "%s is %s but %s is %s: dtypes must match", big_name, lab_dtype_name(big->dtype),
                    small_name, lab_dtype_name(small->dtype));
  if (lab_numel(big) != (int64_t)g->size * lab_numel(small))
    return lab_fail(op, "%s %s must hold %d x %lld elements (group size x %s %s), not %lld", big_name,
                    lab_shape_str(big, a, sizeof a), g->size, (long long)lab_numel(small), small_name,
                    lab_shape_str(small, b, sizeof b), (long long)lab_numel(big));
  if (lab_coll_contiguous_check(op, big_name, big) < 0 || lab_coll_contiguous_check(op, small_name, small) < 0)
    return -1;
  return 0;
}

/* ---- checked mode ---- */

typedef struct {
  int32_t op, dtype, redop, root;
  int64_t count;
  char site[96];
  char traceback[512];
} fingerprint;

static int fingerprints_agree(const fingerprint *a, const fingerprint *b) {
  return a->op == b->op && a->dtype == b->dtype && a->redop == b->redop && a->root == b->root &&
         a->count == b->count;
}

static int describe(const fingerprint *f, char *buf, size_t n) {
  int len = snprintf(buf, n, "%s", lab_coll_name((lab_coll_op)f->op));
  if (f->op != LAB_OP_BARRIER)
    len += snprintf(buf + len, n - (size_t)len, "(%lld x %s", (long long)f->count,
                    lab_dtype_name((lab_dtype)f->dtype));
  if (f->redop >= 0) len += snprintf(buf + len, n - (size_t)len, ", op=%s", lab_redop_name((lab_redop)f->redop));
  if (f->root >= 0) len += snprintf(buf + len, n - (size_t)len, ", root=%d", f->root);
  if (f->op != LAB_OP_BARRIER) len += snprintf(buf + len, n - (size_t)len, ")");
  if (f->site[0]) len += snprintf(buf + len, n - (size_t)len, " at %s", f->site);
  return len;
}

int lab_coll_exchange(lab_group *g, void *mine, void *all, int nbytes) {
  int64_t abandoned = lab_dist_abandoned_count();
  return g->backend->exchange(g, mine, all, nbytes) < 0 ? (lab_dist_abandoned_count() != abandoned ? -2 : -1) : 0;
}

int lab_dist_agree_max(lab_group *g, int64_t v, int64_t *best) {
  int64_t *all = calloc((size_t)g->size, sizeof *all);
  if (!all) return lab_fail("agree_max", "out of memory");
  int rc = lab_dist_exchange_held(g, &v, all, (int)sizeof v);
  *best = v;
  for (int i = 0; rc == 0 && i < g->size; i++) *best = all[i] > *best ? all[i] : *best;
  free(all);
  return rc;
}

int lab_coll_agree(lab_group *g, lab_coll_op op, lab_dtype dt, int64_t count, int redop, int root) {
  if (!checked || op == LAB_OP_SEND || op == LAB_OP_RECV) return 0;
  lab_coll_board_waiting(); /* waiting here counts as being in the collective */
  /* mine and every rank's in one block, which an abandoned exchange keeps (held.h) */
  fingerprint *block = calloc((size_t)g->size + 1, sizeof *block);
  if (!block) return lab_fail(lab_coll_name(op), "out of memory");
  fingerprint *mine = block, *all = block + 1;
  *mine = (fingerprint){.op = op, .dtype = dt, .count = count, .redop = redop, .root = root};
  snprintf(mine->site, sizeof mine->site, "%s", lab_coll_call_site());
  snprintf(mine->traceback, sizeof mine->traceback, "%s", g->wait->traceback);
  int rc = lab_coll_exchange(g, mine, all, (int)sizeof *mine);
  if (rc < 0) {
    if (rc == -2) lab_dist_hold_memory(block);
    else free(block);
    return -1;
  }
  int same = 1;
  for (int r = 1; r < g->size; r++) same = same && fingerprints_agree(&all[0], &all[r]);
  if (!same) {
    char msg[4096];
    int len = snprintf(msg, sizeof msg, "ranks of %s disagree on the collective:", g->name);
    for (int r = 0; r < g->size && len < (int)sizeof msg - 200; r++) {
      len += snprintf(msg + len, sizeof msg - (size_t)len, "\n  rank %d: ", g->world_ranks[r]);
      len += describe(&all[r], msg + len, sizeof msg - (size_t)len);
    }
    /* the first differing rank's traceback, to see how it got there */
    for (int r = 0; r < g->size && len < (int)sizeof msg - 100; r++) {
      if (all[r].traceback[0] && !fingerprints_agree(&all[0], &all[r])) {
        len += snprintf(msg + len, sizeof msg - (size_t)len, "\n  rank %d %s", g->world_ranks[r], all[r].traceback);
        break;
      }
    }
    free(block);
    return lab_fail("desync", "%s", msg); /* the same words on every rank, so it shows once */
  }
  free(block);
  return 0;
}
