/* Gradients of views and copies: each backward maps the gradient back onto the input's
 * layout (reshape back, transpose back, scatter into a zero tensor for narrow/select, sum
 * for expand, split for cat). */
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "../join.h"
#include "../transfer.h"
#include "ops.h"
#include "util.h"

/* view, reshape, (un)squeeze and expand: the input's shape */
typedef struct {
  ag_shape in;
} shape_ctx;

static int reshape_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const shape_ctx *c = AG_CTX(n, shape_ctx);
  lab_tensor *r = lab_reshape(g, c->in.ndim, c->in.dims);
  gin[0] = ag_cast(r, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

static lab_tensor *record_reshape(const char *name, lab_tensor *t, lab_tensor *out) {
  if (!out || !lab_ag_needed(1, &t)) return out;
  lab_node *n = lab_node_new(name, reshape_bw, 1, &t);
  if (!n) return ag_drop(out);
  *AG_CTX(n, shape_ctx) = (shape_ctx){.in = ag_shape_of(t)};
  return ag_finish(n, out, 0);
}

lab_tensor *lab_ad_view(lab_tensor *t, int ndim, const int64_t *shape) {
  return record_reshape("view", t, lab_view(t, ndim, shape));
}
lab_tensor *lab_ad_reshape(lab_tensor *t, int ndim, const int64_t *shape) {
  return record_reshape("reshape", t, lab_reshape(t, ndim, shape));
}
lab_tensor *lab_ad_unsqueeze(lab_tensor *t, int dim) { return record_reshape("unsqueeze", t, lab_unsqueeze(t, dim)); }
lab_tensor *lab_ad_squeeze(lab_tensor *t, int dim) { return record_reshape("squeeze", t, lab_squeeze(t, dim)); }

/* the permutation applied; backward applies its inverse */
typedef struct {
  int perm[LAB_MAX_DIMS];
} permute_ctx;

static int permute_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const permute_ctx *c = AG_CTX(n, permute_ctx);
  int inv[LAB_MAX_DIMS];
  for (int d = 0; d < g->ndim; d++) inv[c->perm[d]] = d;
  lab_tensor *r = lab_permute(g, inv);
  gin[0] = ag_cast(r, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

static lab_tensor *record_permute(lab_tensor *t, lab_tensor *out, const int *perm) {
  if (!out || !lab_ag_needed(1, &t)) return out;
  lab_node *n = lab_node_new("permute", permute_bw, 1, &t);
  if (!n) return ag_drop(out);
  permute_ctx *c = AG_CTX(n, permute_ctx);
  for (int d = 0; d < t->ndim; d++) c->perm[d] = perm[d];
  return ag_finish(n, out, 0);
}

lab_tensor *lab_ad_permute(lab_tensor *t, const int *dims) { return record_permute(t, lab_permute(t, dims), dims); }

lab_tensor *lab_ad_transpose(lab_tensor *t, int d0, int d1) {
  lab_tensor *out = lab_transpose(t, d0, d1);
  int perm[LAB_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) perm[d] = d;
  if (out) {
    perm[d0] = d1;
    perm[d1] = d0;
  }
  return record_permute(t, out, perm);
}

/* narrow/select: the gradient lands in a zero tensor of the input's shape.
 * A tensor split into parts (q, k, v out of one projection) sends one such gradient per part
 * to the same producer: each a zero-filled full-size tensor, added into the producer's pending
 * gradient one after another (at the GPT's qkv, three memsets and two adds of [B, T, 3C] per
 * layer for three [B, T, C] gradients). When the producer already holds a pending gradient
 * that only the engine references (its tensor and storage each held once, no autograd of its
 * own, contiguous), this part's gradient is added into its slot there instead and nothing is
 * sent: the first part still allocates, the others add their third where they added it all. */
typedef struct {
  ag_shape in;
  int dim;
  int64_t start, length; /* length -1: select the index `start` */
} slice_ctx;

/* the slice of t (a tensor of the input's shape) that the node's output was */
static lab_tensor *slice_of(const slice_ctx *c, lab_tensor *t) {
  return c->length < 0 ? lab_select(t, c->dim, c->start) : lab_narrow(t, c->dim, c->start, c->length);
}

static int slice_into_pending(lab_node *n, lab_tensor *g) {
  const slice_ctx *c = AG_CTX(n, slice_ctx);
  lab_node *to = n->next[0].node;
  lab_tensor *p = to ? to->pending : NULL;
  /* contiguous: a gradient that is a broadcast view (stride 0) has elements sharing memory
   * and must not be written through */
  if (!p || p->refcount != 1 || p->storage->refcount != 1 || p->ag || !lab_is_contiguous(p) ||
      p->dtype != g->dtype || p->dtype != (lab_dtype)n->in_dtype[0] || p->ndim != c->in.ndim ||
      lab_device_of(p).type != lab_device_of(g).type || lab_device_of(p).index != lab_device_of(g).index)
    return 0;
  for (int d = 0; d < p->ndim; d++)
    if (p->shape[d] != c->in.dims[d]) return 0;
  lab_tensor *slot = slice_of(c, p);
  int rc = slot ? lab_binary_(LAB_ADD, slot, g) : -1;
  lab_tensor_release(slot);
  return rc < 0 ? -1 : 1;
}

static int slice_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  int done = slice_into_pending(n, g);
  if (done != 0) return done < 0 ? -1 : 0;
  const slice_ctx *c = AG_CTX(n, slice_ctx);
  lab_tensor *z = lab_tensor_zeros_on(lab_device_of(g), (lab_dtype)n->in_dtype[0], c->in.ndim, c->in.dims);
  if (!z) return -1;
  lab_tensor *slot = slice_of(c, z);
  int rc = slot ? lab_copy_(slot, g) : -1;
  lab_tensor_release(slot);
  if (rc < 0) {
    lab_tensor_release(z);
    return -1;
  }
  gin[0] = z;
  return 0;
}

static lab_tensor *record_slice(const char *name, lab_tensor *t, lab_tensor *out, int dim, int64_t start, int64_t len) {
  if (!out || !lab_ag_needed(1, &t)) return out;
  lab_node *n = lab_node_new(name, slice_bw, 1, &t);
  if (!n) return ag_drop(out);
  *AG_CTX(n, slice_ctx) = (slice_ctx){.in = ag_shape_of(t), .dim = dim, .start = start, .length = len};
  return ag_finish(n, out, 0);
}

lab_tensor *lab_ad_narrow(lab_tensor *t, int dim, int64_t start, int64_t length) {
  return record_slice("narrow", t, lab_narrow(t, dim, start, length), dim, start, length);
}
lab_tensor *lab_ad_select(lab_tensor *t, int dim, int64_t index) {
  return record_slice("select", t, lab_select(t, dim, index), dim, index, -1);
}

/* expand: sum the gradient back over the expanded dims */
static int expand_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  gin[0] = ag_to_input(n, 0, ag_ref(g), &AG_CTX(n, shape_ctx)->in);
  return gin[0] ? 0 : -1;
}

lab_tensor *lab_ad_expand(lab_tensor *t, int ndim, const int64_t *shape) {
  lab_tensor *out = lab_expand(t, ndim, shape);
  if (!out || !lab_ag_needed(1, &t)) return out;
  lab_node *n = lab_node_new("expand", expand_bw, 1, &t);
  if (!n) return ag_drop(out);
  *AG_CTX(n, shape_ctx) = (shape_ctx){.in = ag_shape_of(t)};
  return ag_finish(n, out, 0);
}

/* contiguous, clone, to(dtype): the gradient passes through (cast back to the input type) */
static int identity_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  gin[0] = ag_cast(ag_ref(g), n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

static lab_tensor *record_identity(const char *name, lab_tensor *t, lab_tensor *out) {
  if (!out || out == t || !lab_ag_needed(1, &t)) return out;
  lab_node *n = lab_node_new(name, identity_bw, 1, &t);
  if (!n) return ag_drop(out);
  return ag_finish(n, out, 0);
}

lab_tensor *lab_ad_contiguous(lab_tensor *t) {
  if (lab_is_contiguous(t)) return ag_ref(t);
  return record_identity("contiguous", t, lab_clone(t));
}
lab_tensor *lab_ad_clone(lab_tensor *t) { return record_identity("clone", t, lab_clone(t)); }
lab_tensor *lab_ad_to_dtype(lab_tensor *t, lab_dtype dt) {
  if (t->dtype == dt) return ag_ref(t);
  return record_identity("to", t, lab_to_dtype(t, dt));
}

/* to(device): the gradient goes back to the input's device */
typedef struct {
  lab_device from;
} to_device_ctx;

static int to_device_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  lab_tensor *back = lab_to_device(g, AG_CTX(n, to_device_ctx)->from);
  gin[0] = back ? ag_cast(back, n->in_dtype[0]) : NULL;
  return gin[0] ? 0 : -1;
}

lab_tensor *lab_ad_to_device(lab_tensor *t, lab_device dev) {
  lab_device from = lab_device_of(t);
  if (lab_device_eq(from, dev)) return ag_ref(t);
  lab_tensor *out = lab_to_device(t, dev);
  if (!out || !lab_ag_needed(1, &t)) return out;
  lab_node *n = lab_node_new("to", to_device_bw, 1, &t);
  if (!n) return ag_drop(out);
  *AG_CTX(n, to_device_ctx) = (to_device_ctx){.from = from};
  return ag_finish(n, out, 0);
}

/* cat: input k gets its slice of the gradient; the node owns (ctx) each input's length */
typedef struct {
  int dim;
} cat_ctx;

static int cat_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  int dim = AG_CTX(n, cat_ctx)->dim;
  int64_t *lens = n->ctx;
  int64_t at = 0;
  for (int k = 0; k < n->nin; k++) {
    if (ag_wants(n, k)) {
      lab_tensor *s = lab_narrow(g, dim, at, lens[k]);
      lab_tensor *c = s ? lab_contiguous(s) : NULL;
      lab_tensor_release(s);
      if (!c) return -1;
      gin[k] = ag_cast(c, k < 8 ? n->in_dtype[k] : (int)g->dtype);
    }
    at += lens[k];
  }
  return 0;
}

static lab_tensor *record_cat(int n, lab_tensor **ts, int dim, lab_tensor *out) {
  if (!out || !lab_ag_needed(n, ts)) return out;
  lab_node *node = lab_node_new("cat", cat_bw, n, ts);
  int64_t *lens = node ? malloc(sizeof *lens * (size_t)n) : NULL;
  if (!lens) {
    lab_node_release(node);
    return ag_drop(out);
  }
  for (int k = 0; k < n; k++) lens[k] = ts[k]->shape[dim];
  *AG_CTX(node, cat_ctx) = (cat_ctx){.dim = dim};
  node->ctx = lens;
  node->free_ctx = free;
  return ag_finish(node, out, 0);
}

lab_tensor *lab_ad_cat(int n, lab_tensor **ts, int dim) { return record_cat(n, ts, dim, lab_cat(n, ts, dim)); }

lab_tensor *lab_ad_stack(int n, lab_tensor **ts, int dim) {
  /* composed from differentiable unsqueeze and cat, so the gradient shapes follow */
  lab_tensor **u = calloc((size_t)(n ? n : 1), sizeof *u);
  if (!u) return NULL;
  lab_tensor *out = NULL;
  int k = 0;
  for (; k < n; k++) {
    if (dim < 0 || dim > ts[k]->ndim || (k > 0 && !lab_same_shape(ts[k], ts[0]))) break;
    if (!(u[k] = lab_ad_unsqueeze(ts[k], dim))) break;
  }
  if (k == n) out = lab_ad_cat(n, u, dim);
  else if (k < n && u[k] == NULL) out = lab_stack(n, ts, dim); /* reports the error */
  for (int j = 0; j < n; j++) lab_tensor_release(u[j]);
  free(u);
  return out;
}
