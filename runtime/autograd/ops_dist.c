/* Collectives as differentiable ops: the backward of a collective is the collective that
 * moves gradients back the other way. These are the f/g operators of Megatron's tensor
 * parallelism (copy_to: identity forward, all-reduce backward; reduce_from: all-reduce
 * forward, identity backward) and the gather/scatter pairs along a dim. Each returns a new
 * tensor; inputs are never modified. */
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "../join.h"
#include "ops_dist.h"
#include "util.h"

static lab_tensor *summed(lab_group *g, lab_tensor *x) {
  lab_tensor *c = lab_clone(x); /* contiguous, private */
  if (c && lab_all_reduce(g, c, LAB_RED_SUM, NULL) < 0) {
    lab_tensor_release(c);
    return NULL;
  }
  return c;
}

/* all_gather of x along dim: the pieces of every rank concatenated in rank order */
static lab_tensor *gathered(lab_group *g, lab_tensor *x, int dim) {
  int64_t shape[LAB_MAX_DIMS + 1] = {g->size};
  memcpy(shape + 1, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  lab_tensor *xc = lab_contiguous(x);
  lab_tensor *buf = xc ? lab_tensor_empty_on(lab_device_of(x), x->dtype, x->ndim + 1, shape) : NULL;
  int rc = buf ? lab_all_gather(g, buf, xc, NULL) : -1;
  lab_tensor_release(xc);
  if (rc < 0) {
    lab_tensor_release(buf);
    return NULL;
  }
  lab_tensor **pieces = calloc((size_t)g->size, sizeof *pieces);
  lab_tensor *out = NULL;
  int k = 0;
  if (pieces)
    for (; k < g->size; k++)
      if (!(pieces[k] = lab_select(buf, 0, k))) break;
  if (pieces && k == g->size) out = lab_cat(g->size, pieces, dim);
  for (int j = 0; pieces && j < k; j++) lab_tensor_release(pieces[j]);
  free(pieces);
  lab_tensor_release(buf);
  return out;
}

static int split_check(const char *op, lab_group *g, lab_tensor *x, int dim) {
  char s[128];
  if (dim < 0 || dim >= x->ndim) return lab_fail(op, "dim %d out of range for a tensor of %d dimensions", dim + 1, x->ndim);
  if (x->shape[dim] % g->size != 0)
    return lab_fail(op, "dim %d of %s (size %lld) does not split evenly over %d ranks of %s", dim + 1,
                    lab_shape_str(x, s, sizeof s), (long long)x->shape[dim], g->size, g->name);
  return 0;
}

/* this rank's 1/size slice of x along dim */
static lab_tensor *my_slice(lab_group *g, lab_tensor *x, int dim) {
  int64_t len = x->shape[dim] / g->size;
  lab_tensor *v = lab_narrow(x, dim, (int64_t)g->rank * len, len);
  lab_tensor *c = v ? lab_clone(v) : NULL;
  lab_tensor_release(v);
  return c;
}

/* reduce_scatter of x along dim: the sum over ranks of this rank's slice */
static lab_tensor *scattered_sum(lab_group *g, lab_tensor *x, int dim) {
  if (split_check("reduce_scatter", g, x, dim) < 0) return NULL;
  /* move dim first so each rank's block is contiguous, reduce-scatter, move it back */
  lab_tensor *t = lab_transpose(x, 0, dim);
  lab_tensor *tc = t ? lab_contiguous(t) : NULL;
  lab_tensor_release(t);
  if (!tc) return NULL;
  int64_t shape[LAB_MAX_DIMS];
  memcpy(shape, tc->shape, sizeof shape);
  shape[0] /= g->size;
  lab_tensor *out = lab_tensor_empty_on(lab_device_of(x), x->dtype, x->ndim, shape);
  int rc = out ? lab_reduce_scatter(g, out, tc, LAB_RED_SUM, NULL) : -1;
  lab_tensor_release(tc);
  if (rc < 0) {
    lab_tensor_release(out);
    return NULL;
  }
  lab_tensor *back = lab_transpose(out, 0, dim);
  lab_tensor *r = back ? lab_contiguous(back) : NULL;
  lab_tensor_release(back);
  lab_tensor_release(out);
  return r;
}

/* the collective each backward runs (the conjugate of its forward) */
typedef enum { BW_IDENTITY, BW_ALL_REDUCE, BW_GATHER, BW_SCATTER, BW_REDUCE_SCATTER } dist_backward;

/* the node owns (ctx) the group: it lives while the node does, backward runs a collective on it */
typedef struct {
  dist_backward bw;
  int dim;
} dist_ctx;

static int dist_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const dist_ctx *c = AG_CTX(n, dist_ctx);
  lab_group *grp = n->ctx;
  int dim = c->dim;
  lab_tensor *r = NULL;
  switch (c->bw) {
  case BW_IDENTITY: r = ag_ref(g); break;
  case BW_ALL_REDUCE: r = summed(grp, g); break;
  case BW_GATHER: r = gathered(grp, g, dim); break;
  case BW_SCATTER: r = my_slice(grp, g, dim); break;
  case BW_REDUCE_SCATTER: r = scattered_sum(grp, g, dim); break;
  default: break;
  }
  gin[0] = ag_cast(r, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

static void group_unref(void *g) { lab_dist_group_release(g); }

static lab_tensor *record(const char *name, lab_tensor *x, lab_tensor *out, lab_group *g, dist_backward bw, int dim) {
  if (!out || !lab_ag_needed(1, &x)) return out;
  lab_node *n = lab_node_new(name, dist_bw, 1, &x);
  if (!n) return ag_drop(out);
  n->ctx = g;
  lab_dist_group_retain(g);
  n->free_ctx = group_unref;
  *AG_CTX(n, dist_ctx) = (dist_ctx){.bw = bw, .dim = dim};
  return ag_finish(n, out, 0);
}

static int member(const char *op, lab_group *g) {
  if (g->rank >= 0) return 0;
  return lab_fail(op, "this rank is not a member of %s", g->name);
}

/* a gather along dim of x (0-based; the message counts from 1, as Lua does) */
static int gather_dim_check(const char *op, const lab_tensor *x, int dim) {
  if (dim >= 0 && dim < x->ndim) return 0;
  return lab_fail(op, "dim %d out of range for a tensor of %d dimensions", dim + 1, x->ndim);
}

lab_tensor *lab_ad_all_reduce(lab_group *g, lab_tensor *x) {
  if (member("all_reduce", g) < 0) return NULL;
  return record("all_reduce", x, summed(g, x), g, BW_ALL_REDUCE, 0);
}

lab_tensor *lab_ad_all_gather(lab_group *g, lab_tensor *x, int dim) {
  if (member("all_gather", g) < 0 || gather_dim_check("all_gather", x, dim) < 0) return NULL;
  return record("all_gather", x, gathered(g, x, dim), g, BW_REDUCE_SCATTER, dim);
}

lab_tensor *lab_ad_reduce_scatter(lab_group *g, lab_tensor *x, int dim) {
  if (member("reduce_scatter", g) < 0) return NULL;
  return record("reduce_scatter", x, scattered_sum(g, x, dim), g, BW_GATHER, dim);
}

lab_tensor *lab_ad_copy_to_region(lab_group *g, lab_tensor *x) {
  if (member("copy_to_region", g) < 0) return NULL;
  return record("copy_to_region", x, lab_alias(x), g, BW_ALL_REDUCE, 0);
}

lab_tensor *lab_ad_reduce_from_region(lab_group *g, lab_tensor *x) {
  if (member("reduce_from_region", g) < 0) return NULL;
  return record("reduce_from_region", x, summed(g, x), g, BW_IDENTITY, 0);
}

lab_tensor *lab_ad_gather_from_region(lab_group *g, lab_tensor *x, int dim) {
  if (member("gather_from_region", g) < 0 || gather_dim_check("gather_from_region", x, dim) < 0) return NULL;
  return record("gather_from_region", x, gathered(g, x, dim), g, BW_SCATTER, dim);
}

lab_tensor *lab_ad_scatter_to_region(lab_group *g, lab_tensor *x, int dim) {
  if (member("scatter_to_region", g) < 0 || split_check("scatter_to_region", g, x, dim) < 0) return NULL;
  return record("scatter_to_region", x, my_slice(g, x, dim), g, BW_GATHER, dim);
}

/* ---- uneven all-to-all (expert parallelism's dispatch and combine) ---- */

/* What the backward needs: the group and both sides' splits (it runs the reverse exchange). */
typedef struct {
  lab_group *group;
  int64_t *in_splits, *out_splits; /* NULL: even */
  int64_t splits[];
} a2a_ctx;

static void free_a2a(void *p) {
  lab_dist_group_release(((a2a_ctx *)p)->group);
  free(p);
}

/* [sum(out_splits), rest of x's shape] filled by the exchange of x's rows */
static lab_tensor *exchanged(lab_group *g, lab_tensor *x, const int64_t *out_splits, const int64_t *in_splits) {
  int64_t shape[LAB_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  if (out_splits) {
    shape[0] = 0;
    for (int r = 0; r < g->size; r++) shape[0] += out_splits[r] > 0 ? out_splits[r] : 0;
  }
  lab_tensor *xc = lab_contiguous(x);
  lab_tensor *out = xc ? lab_tensor_empty_on(lab_device_of(x), x->dtype, x->ndim, shape) : NULL;
  int rc = out ? lab_all_to_all_single(g, out, out_splits, xc, in_splits, NULL) : -1;
  lab_tensor_release(xc);
  if (rc < 0) {
    lab_tensor_release(out);
    return NULL;
  }
  return out;
}

static int a2a_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  a2a_ctx *c = n->ctx;
  /* the gradient of each received row goes back to the rank that sent it */
  gin[0] = ag_cast(exchanged(c->group, g, c->in_splits, c->out_splits), n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

lab_tensor *lab_ad_all_to_all_single(lab_group *g, lab_tensor *x, const int64_t *out_splits, const int64_t *in_splits) {
  if (member("all_to_all_single", g) < 0) return NULL;
  if (x->ndim < 1) {
    lab_fail("all_to_all_single", "needs a tensor of at least one dimension, got a scalar");
    return NULL;
  }
  lab_tensor *out = exchanged(g, x, out_splits, in_splits);
  if (!out || !lab_ag_needed(1, &x)) return out;
  int n = g->size;
  a2a_ctx *c = malloc(sizeof *c + sizeof(int64_t) * 2 * (size_t)n);
  if (!c) {
    lab_fail("all_to_all_single", "out of memory");
    return ag_drop(out);
  }
  c->group = g; /* retained below, once the node exists: its backward runs on the group */
  c->in_splits = in_splits ? memcpy(c->splits, in_splits, sizeof(int64_t) * (size_t)n) : NULL;
  c->out_splits = out_splits ? memcpy(c->splits + n, out_splits, sizeof(int64_t) * (size_t)n) : NULL;
  lab_node *node = lab_node_new("all_to_all_single", a2a_bw, 1, &x);
  if (!node) {
    free(c);
    return ag_drop(out);
  }
  node->ctx = c;
  node->free_ctx = free_a2a;
  lab_dist_group_retain(g);
  return ag_finish(node, out, 0);
}
