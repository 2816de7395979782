/* Gradients of reductions, softmax and matmul. */
#include <math.h>
#include <string.h>

#include "../error.h"
#include "../matmul.h"
#include "../transfer.h"
#include "ops.h"
#include "util.h"

/* the context of a reduction and of max/min */
typedef struct {
  ag_shape in;      /* the input's shape */
  int dim;          /* the dim reduced, -1: all of them */
  int keepdim;
  lab_reduce_op op; /* reductions */
  double param;     /* var's correction, norm's p */
} reduce_ctx;

/* g reshaped with the reduced dim kept (size 1) so it broadcasts over the input */
static lab_tensor *keep_dim(lab_tensor *g, const reduce_ctx *c) {
  int nd = c->in.ndim;
  int64_t shape[LAB_MAX_DIMS];
  for (int d = 0; d < nd; d++) shape[d] = c->dim < 0 || d == c->dim ? 1 : c->in.dims[d];
  return lab_reshape(g, nd, shape);
}

enum { RED_X, RED_Y }; /* saved: the input and the output, when the gradient reads them */

static int reduce_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const reduce_ctx *c = AG_CTX(n, reduce_ctx);
  lab_reduce_op op = c->op;
  lab_tensor *x = n->saved[RED_X], *y = n->saved[RED_Y];
  int nd = c->in.ndim;
  int64_t count = 1;
  for (int d = 0; d < nd; d++)
    if (c->dim < 0 || d == c->dim) count *= c->in.dims[d];
  lab_tensor *gk = keep_dim(g, c);
  if (!gk) return -1;
  lab_tensor *r = NULL;
  switch (op) {
  case LAB_R_SUM: r = lab_expand(gk, nd, c->in.dims); break;
  case LAB_R_MEAN: r = ag_chain(lab_expand(gk, nd, c->in.dims), LAB_DIV, NULL, (double)count); break;
  case LAB_R_VAR: { /* 2 (x - mean) / (n - correction) */
    lab_tensor *mean = lab_reduction(LAB_R_MEAN, x, c->dim, 1, 0);
    lab_tensor *dx = mean ? lab_binary(LAB_SUB, x, mean, -1) : NULL;
    lab_tensor *s = dx ? ag_chain(lab_binary(LAB_MUL, dx, gk, -1), LAB_MUL, NULL, 2.0 / ((double)count - c->param)) : NULL;
    r = s;
    lab_tensor_release(mean);
    lab_tensor_release(dx);
    break;
  }
  case LAB_R_NORM: { /* p = 2: g x / ||x||; general p: g sign(x) |x|^(p-1) / ||x||^(p-1) */
    double p = c->param;
    lab_tensor *yk = keep_dim(y, c);
    lab_tensor *t = NULL;
    if (yk && p == 2) {
      t = lab_binary(LAB_DIV, x, yk, -1);
    } else if (yk) {
      lab_tensor *ax = lab_unary(LAB_ABS, x);
      lab_tensor *axp = ax ? ag_scalar_op(ax, LAB_POW, p - 1) : NULL;
      lab_tensor *yp = ag_scalar_op(yk, LAB_POW, p - 1);
      lab_tensor *q = (axp && yp) ? lab_binary(LAB_DIV, axp, yp, -1) : NULL;
      lab_tensor *sign = ag_sign(x);
      t = (q && sign) ? lab_binary(LAB_MUL, q, sign, -1) : NULL;
      lab_tensor_release(ax);
      lab_tensor_release(axp);
      lab_tensor_release(yp);
      lab_tensor_release(q);
      lab_tensor_release(sign);
    }
    r = t ? lab_binary(LAB_MUL, t, gk, -1) : NULL;
    lab_tensor_release(t);
    lab_tensor_release(yk);
    break;
  }
  case LAB_R_PROD: { /* y / x (inputs with zeros are not handled specially) */
    lab_tensor *yk = keep_dim(y, c);
    r = yk ? ag_chain(lab_binary(LAB_DIV, yk, x, -1), LAB_MUL, gk, 0) : NULL;
    lab_tensor_release(yk);
    break;
  }
  default: break;
  }
  lab_tensor_release(gk);
  if (!r) return -1;
  lab_tensor *rc = lab_contiguous(r);
  lab_tensor_release(r);
  gin[0] = ag_cast(rc, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

static reduce_ctx *store_reduce(lab_node *n, const lab_tensor *t, int dim, int keepdim) {
  reduce_ctx *c = AG_CTX(n, reduce_ctx);
  *c = (reduce_ctx){.in = ag_shape_of(t), .dim = t->ndim == 0 ? -1 : dim, .keepdim = keepdim};
  return c;
}

lab_tensor *lab_ad_reduction(lab_reduce_op op, lab_tensor *t, int dim, int keepdim, double param) {
  lab_tensor *out = lab_reduction(op, t, dim, keepdim, param);
  if (!out || !lab_ag_needed(1, &t)) return out;
  lab_node *n = lab_node_new(lab_reduce_name(op), reduce_bw, 1, &t);
  if (!n) return ag_drop(out);
  reduce_ctx *c = store_reduce(n, t, dim, keepdim);
  c->op = op;
  c->param = param;
  int rc = 0;
  if (op == LAB_R_VAR || op == LAB_R_NORM || op == LAB_R_PROD) rc |= lab_node_save(n, RED_X, t);
  if (op == LAB_R_NORM || op == LAB_R_PROD) rc |= lab_node_save(n, RED_Y, out);
  return ag_finish(n, out, rc);
}

/* max/min: the gradient goes to the selected element (over a dim), or is shared among
 * the tied maxima (over everything), as PyTorch does. saved: the input, the values, the
 * indices (over a dim) */
enum { EXT_X, EXT_VALUES, EXT_INDICES };

static int ext_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const reduce_ctx *c = AG_CTX(n, reduce_ctx);
  lab_tensor *x = n->saved[EXT_X], *v = n->saved[EXT_VALUES];
  int nd = c->in.ndim, dim = c->dim;
  lab_tensor *vk = keep_dim(v, c), *gk = keep_dim(g, c);
  lab_tensor *mask = (vk && gk) ? lab_binary(LAB_EQ, x, vk, g->dtype) : NULL;
  lab_tensor *r = NULL;
  if (mask && dim < 0) {
    lab_tensor *cnt = lab_reduction(LAB_R_SUM, mask, -1, 0, 0);
    lab_tensor *share = cnt ? lab_binary(LAB_DIV, gk, cnt, -1) : NULL;
    r = share ? lab_binary(LAB_MUL, mask, share, -1) : NULL;
    lab_tensor_release(cnt);
    lab_tensor_release(share);
  } else if (mask) {
    /* only the first maximum along the dim (the index returned) gets the gradient */
    lab_tensor *ix = keep_dim(n->saved[EXT_INDICES], c);
    lab_tensor *pos_host = lab_tensor_arange(LAB_I64, 0, (double)c->in.dims[dim], 1);
    lab_tensor *pos = pos_host ? lab_to_device(pos_host, lab_device_of(g)) : NULL;
    lab_tensor_release(pos_host);
    int64_t shape[LAB_MAX_DIMS];
    for (int d = 0; d < nd; d++) shape[d] = d == dim ? c->in.dims[d] : 1;
    lab_tensor *posv = pos ? lab_view(pos, nd, shape) : NULL;
    lab_tensor *hit = (ix && posv) ? lab_binary(LAB_EQ, posv, ix, g->dtype) : NULL;
    r = hit ? lab_binary(LAB_MUL, hit, gk, -1) : NULL;
    lab_tensor_release(ix);
    lab_tensor_release(pos);
    lab_tensor_release(posv);
    lab_tensor_release(hit);
  }
  lab_tensor_release(vk);
  lab_tensor_release(gk);
  lab_tensor_release(mask);
  gin[0] = ag_cast(r, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

int lab_ad_reduce_ext(lab_tensor *t, int dim, int keepdim, int want_max, lab_tensor **values,
                      lab_tensor **indices) {
  if (lab_reduce_ext(t, dim, keepdim, want_max, values, indices) < 0) return -1;
  if (!lab_ag_needed(1, &t)) return 0;
  lab_node *n = lab_node_new(want_max ? "max" : "min", ext_bw, 1, &t);
  if (!n) return -1;
  store_reduce(n, t, dim, keepdim);
  int rc = lab_node_save(n, EXT_X, t) | lab_node_save(n, EXT_VALUES, *values);
  if (dim >= 0) rc |= lab_node_save(n, EXT_INDICES, *indices);
  if (rc != 0) {
    lab_node_release(n);
    return -1;
  }
  return lab_node_attach(n, *values);
}

/* softmax: dx = y (g - sum(g y)); log_softmax: dx = g - exp(y) sum(g). saved: the output */
typedef struct {
  int dim;
  int log; /* log_softmax */
} softmax_ctx;

static int softmax_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const softmax_ctx *c = AG_CTX(n, softmax_ctx);
  lab_tensor *y = n->saved[0];
  int dim = c->dim;
  lab_tensor *r = NULL;
  if (c->log) {
    lab_tensor *s = lab_reduction(LAB_R_SUM, g, dim, 1, 0);
    lab_tensor *p = lab_unary(LAB_EXP, y);
    lab_tensor *ps = (s && p) ? lab_binary(LAB_MUL, p, s, -1) : NULL;
    r = ps ? lab_binary(LAB_SUB, g, ps, -1) : NULL;
    lab_tensor_release(s);
    lab_tensor_release(p);
    lab_tensor_release(ps);
  } else {
    lab_tensor *gy = lab_binary(LAB_MUL, g, y, -1);
    lab_tensor *s = gy ? lab_reduction(LAB_R_SUM, gy, dim, 1, 0) : NULL;
    lab_tensor *d = s ? lab_binary(LAB_SUB, g, s, -1) : NULL;
    r = d ? lab_binary(LAB_MUL, y, d, -1) : NULL;
    lab_tensor_release(gy);
    lab_tensor_release(s);
    lab_tensor_release(d);
  }
  gin[0] = ag_cast(r, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

lab_tensor *lab_ad_softmax(lab_tensor *t, int dim, int log) {
  lab_tensor *out = lab_softmax(t, dim, log);
  if (!out || !lab_ag_needed(1, &t)) return out;
  lab_node *n = lab_node_new(log ? "log_softmax" : "softmax", softmax_bw, 1, &t);
  if (!n) return ag_drop(out);
  *AG_CTX(n, softmax_ctx) = (softmax_ctx){.dim = dim, .log = log};
  return ag_finish(n, out, lab_node_save(n, 0, out));
}

/* C = A B over the last two dims: dA = dC B^T, dB = A^T dC, summed over broadcast batch
 * dims. 1-D operands are handled by composing unsqueeze/view around this. saved: A (when B
 * wants a gradient), B (when A does) */
enum { MM_A, MM_B };
typedef struct {
  ag_shape a_shape, b_shape;
} matmul_ctx;

static int matmul_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const matmul_ctx *c = AG_CTX(n, matmul_ctx);
  lab_tensor *a = n->saved[MM_A], *b = n->saved[MM_B];
  if (ag_wants(n, 0)) {
    lab_tensor *bt = lab_transpose(b, b->ndim - 2, b->ndim - 1);
    lab_tensor *r = bt ? lab_matmul(g, bt) : NULL;
    lab_tensor_release(bt);
    if (!(gin[0] = ag_to_input(n, 0, r, &c->a_shape))) return -1;
  }
  if (ag_wants(n, 1)) {
    lab_tensor *at = lab_transpose(a, a->ndim - 2, a->ndim - 1);
    lab_tensor *r = at ? lab_matmul(at, g) : NULL;
    lab_tensor_release(at);
    if (!(gin[1] = ag_to_input(n, 1, r, &c->b_shape))) return -1;
  }
  return 0;
}

static lab_tensor *matmul_nd(lab_tensor *a, lab_tensor *b) {
  lab_tensor *out = lab_matmul(a, b);
  lab_tensor *in[2] = {a, b};
  if (!out || !lab_ag_needed(2, in)) return out;
  lab_node *n = lab_node_new("matmul", matmul_bw, 2, in);
  if (!n) return ag_drop(out);
  *AG_CTX(n, matmul_ctx) = (matmul_ctx){.a_shape = ag_shape_of(a), .b_shape = ag_shape_of(b)};
  int rc = 0;
  if (ag_wants(n, 1)) rc |= lab_node_save(n, MM_A, a);
  if (ag_wants(n, 0)) rc |= lab_node_save(n, MM_B, b);
  return ag_finish(n, out, rc);
}

lab_tensor *lab_ad_matmul(lab_tensor *a, lab_tensor *b) {
  if (a->ndim >= 2 && b->ndim >= 2) return matmul_nd(a, b);
  if (a->ndim == 0 || b->ndim == 0) return lab_matmul(a, b); /* reports the error */
  lab_tensor *A = a->ndim == 1 ? lab_ad_unsqueeze(a, 0) : ag_ref(a);
  lab_tensor *B = b->ndim == 1 ? lab_ad_unsqueeze(b, 1) : ag_ref(b);
  lab_tensor *C = (A && B) ? matmul_nd(A, B) : NULL;
  lab_tensor_release(A);
  lab_tensor_release(B);
  if (!C) return NULL;
  int64_t shape[LAB_MAX_DIMS];
  int nd = lab_matmul_drop_vector_dims(a->ndim, b->ndim, C, shape);
  lab_tensor *r = lab_ad_view(C, nd, shape);
  lab_tensor_release(C);
  return r;
}
