/* Neural-network ops with fused kernels (kernels/cpu/nn.c). Each converts its inputs to a
 * contiguous compute-type copy (f32 for the half types, f64 for f64), runs the kernel of the
 * inputs' device (runtime/device.h), and returns the result in the input's dtype; the
 * backward does the same with the gradient. */
#include <math.h>
#include <string.h>

#include "../../kernels/cpu/reduce.h"
#include "../error.h"
#include "../matmul.h"
#include "../random.h"
#include "../transfer.h"
#include "ops.h"
#include "util.h"

/* A contiguous copy (or t itself) in the compute type of t. */
static lab_tensor *ct_of(lab_tensor *t) {
  lab_dtype ct = t->dtype == LAB_F64 ? LAB_F64 : LAB_F32;
  lab_tensor *c = lab_to_dtype(t, ct);
  if (!c) return NULL;
  lab_tensor *cc = lab_contiguous(c);
  lab_tensor_release(c);
  return cc;
}

static lab_dtype ct_type(lab_dtype t) { return t == LAB_F64 ? LAB_F64 : LAB_F32; }

static int float_check(const char *op, const char *what, const lab_tensor *t) {
  if (lab_dtype_is_float(t->dtype)) return 0;
  return lab_fail(op, "%s must be floating point, got %s", what, lab_dtype_name(t->dtype));
}

/* Int64 contiguous ids, each checked to lie in [0, limit) (or equal *allowed, when given: the
 * ignore_index of a loss; a sentinel value instead of NULL let embedding accept id -1). Where
 * the device has device-side asserts (check_slot: cuda, the sim over runtime/simrt) the check is
 * a kernel (ids_check) and a bad id is raised by the device at its next host wait, naming the
 * op: reading the ids back here stopped the GPU three times a GPT step (issue 23). Its copy of
 * the ids has every bad one replaced (by 0 or *allowed), so the kernels after it stay in bounds.
 * Elsewhere (the cpu) the ids are checked on the host and a bad one fails here, at once. */
static lab_tensor *ids_of(const char *op, lab_tensor *idx, int64_t limit, const int64_t *allowed) {
  if (lab_dtype_is_float(idx->dtype) || idx->dtype == LAB_BOOL) {
    lab_fail(op, "ids must be integers, got %s", lab_dtype_name(idx->dtype));
    return NULL;
  }
  lab_tensor *c = lab_to_dtype(idx, LAB_I64);
  lab_tensor *cc = c ? lab_contiguous(c) : NULL;
  lab_tensor_release(c);
  if (!cc) return NULL;
  int64_t n = lab_numel(cc), keep = allowed ? *allowed : 0; /* 0: a row in range, when there is one */
  const lab_device_ops *ops = lab_ops_of(cc);
  if (ops->check_slot && n > 0) {
    lab_device d = lab_device_of(cc);
    int64_t *slot = NULL;
    if (limit == 0 && !allowed) lab_fail(op, "%lld ids, but the range [0, 0) is empty (no rows)", (long long)n);
    else slot = ops->check_slot(d.index, op, limit);
    lab_tensor *out = slot ? lab_tensor_empty_on(d, LAB_I64, cc->ndim, cc->shape) : NULL;
    if (out && ops->ids_check(lab_data(cc), lab_data(out), n, limit, keep, slot) < 0) {
      lab_tensor_release(out); /* the launch failed, or (LLMLAB_CUDA_LAUNCH_BLOCKING=1) a bad id: raised here */
      out = NULL;
    }
    lab_tensor_release(cc);
    return out;
  }
  lab_tensor *h = lab_to_host(cc);
  if (!h) {
    lab_tensor_release(cc);
    return NULL;
  }
  int64_t bad[2] = {0, 0};
  lab_cpu_device_ops()->ids_check(lab_data(h), NULL, n, limit, keep, bad);
  if (limit == 0 && !allowed && n > 0) bad[0] = 1, bad[1] = ((const int64_t *)lab_data(h))[0]; /* 0 is no row */
  lab_tensor_release(h);
  if (bad[0]) {
    lab_fail(op, "id %lld at position %lld is outside [0, %lld) (ids count from 0)", (long long)bad[1],
             (long long)bad[0], (long long)limit);
    lab_tensor_release(cc);
    return NULL;
  }
  return cc;
}

/* ---- embedding ---- */

enum { EMB_IDS }; /* saved: the ids (i64, contiguous) */
typedef struct {
  int64_t weight_shape[2]; /* [vocab, dim] */
} embedding_ctx;

static int embedding_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const embedding_ctx *c = AG_CTX(n, embedding_ctx);
  lab_tensor *ids = n->saved[EMB_IDS];
  lab_tensor *gc = ct_of(g);
  lab_tensor *dw = gc ? lab_tensor_zeros_on(lab_device_of(gc), gc->dtype, 2, c->weight_shape) : NULL;
  if (!dw) {
    lab_tensor_release(gc);
    return -1;
  }
  int rc = lab_ops_of(gc)->embedding_bwd(gc->dtype, lab_data(gc), lab_data(ids), lab_data(dw), lab_numel(ids),
                                         c->weight_shape[1]);
  lab_tensor_release(gc);
  if (rc < 0) {
    lab_tensor_release(dw);
    return -1;
  }
  gin[0] = ag_cast(dw, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

lab_tensor *lab_ad_embedding(lab_tensor *weight, lab_tensor *idx) {
  char s[128];
  if (weight->ndim != 2) {
    lab_fail("embedding", "weight must be [vocab, dim], got %s", lab_shape_str(weight, s, sizeof s));
    return NULL;
  }
  if (idx->ndim + 1 > LAB_MAX_DIMS) {
    lab_fail("embedding", "ids have too many dimensions");
    return NULL;
  }
  lab_device dev;
  lab_tensor *wi[2] = {weight, idx};
  if (lab_common_device("embedding", 2, wi, &dev) < 0) return NULL;
  lab_tensor *ids = ids_of("embedding", idx, weight->shape[0], NULL);
  if (!ids) return NULL;
  lab_tensor *w = lab_contiguous(weight);
  int64_t shape[LAB_MAX_DIMS];
  memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
  shape[idx->ndim] = weight->shape[1];
  lab_tensor *out = w ? lab_tensor_empty_on(dev, weight->dtype, idx->ndim + 1, shape) : NULL;
  if (out && lab_ops_of(w)->embedding_fwd(weight->dtype, lab_data(w), lab_data(ids), lab_data(out), lab_numel(ids),
                                          weight->shape[1]) < 0) {
    lab_tensor_release(out);
    out = NULL;
  }
  lab_tensor_release(w);
  if (!out || !lab_ag_needed(1, &weight)) {
    lab_tensor_release(ids);
    return out;
  }
  lab_node *n = lab_node_new("embedding", embedding_bw, 1, &weight);
  if (!n) {
    lab_tensor_release(ids);
    return ag_drop(out);
  }
  *AG_CTX(n, embedding_ctx) = (embedding_ctx){.weight_shape = {weight->shape[0], weight->shape[1]}};
  int rc = lab_node_save(n, EMB_IDS, ids);
  lab_tensor_release(ids);
  return ag_finish(n, out, rc);
}

/* ---- layer norm and RMS norm ---- */

/* saved: x and w (or NULL) in the compute type, the rows' mean (layer norm) and 1/std */
enum { NORM_X, NORM_W, NORM_MEAN, NORM_RSTD };
typedef struct {
  int64_t rows, D; /* x as [rows, D] */
  int rms;         /* RMS norm (no mean, no bias) */
} norm_ctx;

static int norm_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const norm_ctx *c = AG_CTX(n, norm_ctx);
  lab_tensor *x = n->saved[NORM_X], *w = n->saved[NORM_W], *mean = n->saved[NORM_MEAN], *rstd = n->saved[NORM_RSTD];
  int64_t rows = c->rows, D = c->D;
  int rms = c->rms;
  lab_dtype ct = x->dtype;
  lab_tensor *gc = lab_to_dtype(g, ct), *gcc = gc ? lab_contiguous(gc) : NULL;
  lab_tensor_release(gc);
  if (!gcc) return -1;
  lab_device dev = lab_device_of(x);
  const lab_device_ops *ops = lab_ops_of(x);
  lab_tensor *dx = ag_wants(n, 0) ? lab_tensor_empty_on(dev, ct, x->ndim, x->shape) : NULL;
  lab_tensor *dw = (w && ag_wants(n, 1)) ? lab_tensor_zeros_on(dev, ct, 1, &D) : NULL;
  lab_tensor *db = (!rms && n->nin > 2 && ag_wants(n, 2)) ? lab_tensor_zeros_on(dev, ct, 1, &D) : NULL;
  int rc;
  if (rms)
    rc = ops->rms_norm_bwd(ct, lab_data(gcc), lab_data(x), w ? lab_data(w) : NULL, lab_data(rstd),
                           dx ? lab_data(dx) : NULL, dw ? lab_data(dw) : NULL, rows, D);
  else
    rc = ops->layer_norm_bwd(ct, lab_data(gcc), lab_data(x), w ? lab_data(w) : NULL, lab_data(mean),
                             lab_data(rstd), dx ? lab_data(dx) : NULL, dw ? lab_data(dw) : NULL,
                             db ? lab_data(db) : NULL, rows, D);
  lab_tensor_release(gcc);
  if (rc < 0) {
    ag_release_all(3, (lab_tensor *[]){dx, dw, db});
    return -1;
  }
  if (dx) gin[0] = ag_cast(dx, n->in_dtype[0]);
  if (dw) gin[1] = ag_cast(dw, n->in_dtype[1]);
  if (db) gin[2] = ag_cast(db, n->in_dtype[2]);
  return 0;
}

static int norm_param_check(const char *op, const char *what, const lab_tensor *p, int64_t D) {
  char s[128];
  if (!p) return 0;
  if (p->ndim != 1 || p->shape[0] != D)
    return lab_fail(op, "%s of shape %s does not match the last dim %lld of the input", what,
                    lab_shape_str(p, s, sizeof s), (long long)D);
  return float_check(op, what, p);
}

static lab_tensor *norm(const char *op, lab_tensor *x, lab_tensor *w, lab_tensor *b, double eps, int rms) {
  if (x->ndim == 0) {
    lab_fail(op, "needs at least one dimension");
    return NULL;
  }
  int64_t D = x->shape[x->ndim - 1], rows = D ? lab_numel(x) / D : 0;
  if (float_check(op, "input", x) < 0 || norm_param_check(op, "weight", w, D) < 0 ||
      norm_param_check(op, "bias", b, D) < 0)
    return NULL;
  lab_device dev;
  lab_tensor *xwb[3] = {x, w, b};
  if (lab_common_device(op, 3, xwb, &dev) < 0) return NULL;
  const lab_device_ops *ops = lab_device_ops_of(dev.type);
  lab_dtype ct = ct_type(x->dtype);
  lab_tensor *xc = ct_of(x), *wc = w ? ct_of(w) : NULL, *bc = b ? ct_of(b) : NULL;
  lab_tensor *y = lab_tensor_empty_on(dev, ct, x->ndim, x->shape);
  lab_tensor *mean = lab_tensor_empty_on(dev, ct, 1, &rows), *rstd = lab_tensor_empty_on(dev, ct, 1, &rows);
  lab_tensor *out = NULL;
  if (xc && (!w || wc) && (!b || bc) && y && mean && rstd) {
    int rc = rms ? ops->rms_norm_fwd(ct, lab_data(xc), wc ? lab_data(wc) : NULL, lab_data(y), lab_data(rstd), rows, D,
                                     eps)
                 : ops->layer_norm_fwd(ct, lab_data(xc), wc ? lab_data(wc) : NULL, bc ? lab_data(bc) : NULL,
                                       lab_data(y), lab_data(mean), lab_data(rstd), rows, D, eps);
    out = rc < 0 ? NULL : lab_to_dtype(y, x->dtype);
  }
  lab_tensor *in[3] = {x, w, b};
  int nin = rms ? 2 : 3;
  if (out && lab_ag_needed(nin, in)) {
    lab_node *n = lab_node_new(op, norm_bw, nin, in);
    int rc = 0;
    if (n) {
      *AG_CTX(n, norm_ctx) = (norm_ctx){.rows = rows, .D = D, .rms = rms};
      rc = lab_node_save(n, NORM_X, xc) | lab_node_save(n, NORM_MEAN, mean) | lab_node_save(n, NORM_RSTD, rstd);
      if (wc) rc |= lab_node_save(n, NORM_W, wc);
    }
    out = ag_finish(n, out, rc);
  }
  ag_release_all(6, (lab_tensor *[]){xc, wc, bc, y, mean, rstd});
  return out;
}

lab_tensor *lab_ad_layer_norm(lab_tensor *x, lab_tensor *w, lab_tensor *b, double eps) {
  return norm("layer_norm", x, w, b, eps, 0);
}

lab_tensor *lab_ad_rms_norm(lab_tensor *x, lab_tensor *w, double eps) { return norm("rms_norm", x, w, NULL, eps, 1); }

/* ---- activations ---- */

enum { ACT_X }; /* saved: x in the compute type */
typedef struct {
  lab_act_kind kind;
} act_ctx;

static int act_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const act_ctx *c = AG_CTX(n, act_ctx);
  lab_tensor *x = n->saved[ACT_X];
  lab_tensor *gc = lab_to_dtype(g, x->dtype), *gcc = gc ? lab_contiguous(gc) : NULL;
  lab_tensor_release(gc);
  lab_tensor *dx = gcc ? lab_tensor_empty_on(lab_device_of(x), x->dtype, x->ndim, x->shape) : NULL;
  if (dx && lab_ops_of(x)->act_bwd(x->dtype, c->kind, lab_data(gcc), lab_data(x), lab_data(dx), lab_numel(x)) < 0) {
    lab_tensor_release(dx);
    dx = NULL;
  }
  lab_tensor_release(gcc);
  gin[0] = ag_cast(dx, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

static lab_tensor *activation(const char *op, lab_tensor *x, lab_act_kind kind) {
  if (float_check(op, "input", x) < 0) return NULL;
  lab_tensor *xc = ct_of(x);
  lab_tensor *y = xc ? lab_tensor_empty_on(lab_device_of(x), xc->dtype, x->ndim, x->shape) : NULL;
  int rc = y ? lab_ops_of(x)->act_fwd(xc->dtype, kind, lab_data(xc), lab_data(y), lab_numel(x)) : -1;
  lab_tensor *out = rc == 0 ? lab_to_dtype(y, x->dtype) : NULL;
  lab_tensor_release(y);
  if (out && lab_ag_needed(1, &x)) {
    lab_node *n = lab_node_new(op, act_bw, 1, &x);
    if (n) *AG_CTX(n, act_ctx) = (act_ctx){.kind = kind};
    out = ag_finish(n, out, n ? lab_node_save(n, ACT_X, xc) : 0);
  }
  lab_tensor_release(xc);
  return out;
}

lab_tensor *lab_ad_gelu(lab_tensor *x, int tanh_approx) {
  return activation("gelu", x, tanh_approx ? LAB_ACT_GELU_TANH : LAB_ACT_GELU);
}
lab_tensor *lab_ad_silu(lab_tensor *x) { return activation("silu", x, LAB_ACT_SILU); }

/* ---- dropout ---- */

enum { DROPOUT_MASK }; /* saved: the scaled keep mask (0 or 1/(1-p)) in the input's dtype */

static int dropout_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  lab_tensor *r = lab_binary(LAB_MUL, g, n->saved[DROPOUT_MASK], -1);
  gin[0] = ag_cast(r, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

lab_tensor *lab_ad_dropout(lab_tensor *x, double p, int training) {
  if (!(p >= 0 && p < 1)) { /* NaN too */
    lab_fail("dropout", "probability %g must be in [0, 1)", p);
    return NULL;
  }
  if (!training || p == 0) return ag_ref(x);
  if (float_check("dropout", "input", x) < 0) return NULL;
  lab_tensor *u = lab_tensor_empty_on(lab_device_of(x), ct_type(x->dtype), x->ndim, x->shape);
  if (!u || lab_rand_(u, 0, 1) < 0) {
    lab_tensor_release(u);
    return NULL;
  }
  lab_tensor *pt = lab_tensor_scalar(u->dtype, p);
  lab_tensor *keep = pt ? lab_binary(LAB_GE, u, pt, x->dtype) : NULL;
  lab_tensor *mask = keep ? ag_chain(keep, LAB_MUL, NULL, 1.0 / (1.0 - p)) : NULL;
  lab_tensor_release(u);
  lab_tensor_release(pt);
  lab_tensor *out = mask ? lab_binary(LAB_MUL, x, mask, -1) : NULL;
  if (out && lab_ag_needed(1, &x)) {
    lab_node *n = lab_node_new("dropout", dropout_bw, 1, &x);
    out = n ? ag_finish(n, out, lab_node_save(n, DROPOUT_MASK, mask)) : ag_drop(out);
  }
  lab_tensor_release(mask);
  return out;
}

/* ---- cross-entropy ---- */

/* saved: the logits (compute type, [N, C]), the targets (i64), each row's log-sum-exp and,
 * where the count of rows not ignored stayed on the device, 1 / count (f64, a device scalar) */
enum { XENT_LOGITS, XENT_TARGETS, XENT_LSE, XENT_INV_COUNT };
typedef struct {
  int64_t N, C;
  int64_t ignore_index;
  int64_t count; /* targets that were not ignored: the mean's divisor (-1: XENT_INV_COUNT has it) */
  double label_smoothing;
  ag_shape logits_shape; /* before the fold to [N, C] */
} xent_ctx;

static int xent_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const xent_ctx *c = AG_CTX(n, xent_ctx);
  lab_tensor *x = n->saved[XENT_LOGITS];
  int64_t N = c->N, C = c->C;
  double scale = 1;
  lab_tensor *dev_scale = NULL; /* g / count on the device: the seed gradient never read by the host */
  if (c->count >= 0) {
    double gv;
    if (lab_item_f64(g, &gv) < 0) return -1;
    scale = gv / (double)(c->count ? c->count : 1);
  } else {
    lab_tensor *g64 = lab_to_dtype(g, LAB_F64);
    lab_tensor *gs = g64 ? lab_binary(LAB_MUL, g64, n->saved[XENT_INV_COUNT], LAB_F64) : NULL;
    dev_scale = gs ? lab_to_dtype(gs, x->dtype) : NULL;
    ag_release_all(2, (lab_tensor *[]){g64, gs});
    if (!dev_scale) return -1;
  }
  lab_tensor *dx = lab_tensor_empty_on(lab_device_of(x), x->dtype, 2, (int64_t[]){N, C});
  if (dx && lab_ops_of(x)->xent_bwd(x->dtype, lab_data(x), lab_data(n->saved[XENT_TARGETS]),
                                    lab_data(n->saved[XENT_LSE]), lab_data(dx), N, C, c->ignore_index,
                                    c->label_smoothing, scale) < 0) {
    lab_tensor_release(dx);
    dx = NULL;
  }
  if (dx && dev_scale && lab_binary_(LAB_MUL, dx, dev_scale) < 0) {
    lab_tensor_release(dx);
    dx = NULL;
  }
  lab_tensor_release(dev_scale);
  if (!dx) return -1;
  lab_tensor *r = lab_view(dx, c->logits_shape.ndim, c->logits_shape.dims);
  lab_tensor_release(dx);
  gin[0] = ag_cast(r, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

/* The mean in double on the host (the cpu, where the count came back): the sum of every device */
static lab_tensor *xent_host_mean(lab_tensor *loss, lab_dtype ct, int64_t N, int64_t count, lab_device dev,
                                  lab_dtype dt) {
  lab_tensor *h = lab_to_host(loss), *out = NULL;
  if (h) out = lab_tensor_full_on(dev, dt, 0, NULL, count ? lab_row_sum_f(ct, lab_data(h), N) / (double)count : NAN);
  lab_tensor_release(h);
  return out;
}

/* The mean in double on the device (cuda: the count stayed there), with 1 / count for the
 * backward: no wait for the GPU. NaN when every row is ignored, as on the host. */
static lab_tensor *xent_device_mean(lab_tensor *loss, lab_tensor *tg, int64_t ignore_index, lab_dtype dt,
                                    lab_tensor **inv_count) {
  lab_tensor *l64 = lab_to_dtype(loss, LAB_F64);
  lab_tensor *total = l64 ? lab_reduction(LAB_R_SUM, l64, -1, 0, 0) : NULL;
  lab_tensor *ign = total ? lab_tensor_full_on(lab_device_of(tg), LAB_I64, 0, NULL, (double)ignore_index) : NULL;
  lab_tensor *kept = ign ? lab_binary(LAB_NE, tg, ign, LAB_F64) : NULL;
  lab_tensor *count = kept ? lab_reduction(LAB_R_SUM, kept, -1, 0, 0) : NULL;
  lab_tensor *mean = count ? lab_binary(LAB_DIV, total, count, LAB_F64) : NULL;
  lab_tensor *out = mean ? lab_to_dtype(mean, dt) : NULL;
  /* the backward's 1 / max(count, 1): every row ignored gives a zero gradient, as on the host */
  lab_tensor *one = out ? lab_tensor_full_on(lab_device_of(tg), LAB_F64, 0, NULL, 1) : NULL;
  lab_tensor *at_least = one ? lab_clamp(count, 1, 1, 0, 0) : NULL;
  *inv_count = at_least ? lab_binary(LAB_DIV, one, at_least, LAB_F64) : NULL;
  if (!*inv_count) {
    lab_tensor_release(out);
    out = NULL;
  }
  ag_release_all(8, (lab_tensor *[]){l64, total, ign, kept, count, mean, one, at_least});
  return out;
}

lab_tensor *lab_ad_cross_entropy(lab_tensor *logits, lab_tensor *target, int64_t ignore_index,
                                 double label_smoothing) {
  char a[128], b[128];
  const char *op = "cross_entropy";
  if (float_check(op, "logits", logits) < 0) return NULL;
  if (logits->ndim < 1 || logits->ndim - 1 != target->ndim) {
    lab_fail(op, "logits %s need one more dim (the classes) than targets %s", lab_shape_str(logits, a, sizeof a),
             lab_shape_str(target, b, sizeof b));
    return NULL;
  }
  for (int d = 0; d < target->ndim; d++)
    if (target->shape[d] != logits->shape[d]) {
      lab_fail(op, "logits %s and targets %s disagree in dim %d", lab_shape_str(logits, a, sizeof a),
               lab_shape_str(target, b, sizeof b), d + 1);
      return NULL;
    }
  if (!(label_smoothing >= 0 && label_smoothing <= 1)) { /* NaN too */
    lab_fail(op, "label_smoothing %g must be in [0, 1]", label_smoothing);
    return NULL;
  }
  lab_device dev;
  lab_tensor *lt[2] = {logits, target};
  if (lab_common_device(op, 2, lt, &dev) < 0) return NULL;
  int64_t C = logits->shape[logits->ndim - 1], N = C ? lab_numel(logits) / C : 0;
  lab_tensor *tg = ids_of(op, target, C, &ignore_index);
  lab_tensor *xc = tg ? ct_of(logits) : NULL;
  lab_dtype ct = ct_type(logits->dtype);
  lab_tensor *loss = xc ? lab_tensor_empty_on(dev, ct, 1, &N) : NULL;
  lab_tensor *lse = loss ? lab_tensor_empty_on(dev, ct, 1, &N) : NULL;
  lab_tensor *out = NULL;
  int64_t count = 0;
  lab_tensor *inv_count = NULL;
  if (lse) {
    count = lab_device_ops_of(dev.type)->xent_fwd(ct, lab_data(xc), lab_data(tg), lab_data(loss), lab_data(lse), N,
                                                   C, ignore_index, label_smoothing);
    if (count >= 0) out = xent_host_mean(loss, ct, N, count, dev, logits->dtype);
    else if (count == -1) out = xent_device_mean(loss, tg, ignore_index, logits->dtype, &inv_count);
    /* else -2: the launch failed, lab_fail named cross_entropy (kernels/fused_ops.h) */
  }
  if (out && lab_ag_needed(1, &logits)) {
    lab_node *n = lab_node_new(op, xent_bw, 1, &logits);
    int rc = 0;
    if (n) {
      *AG_CTX(n, xent_ctx) = (xent_ctx){.N = N, .C = C, .ignore_index = ignore_index, .count = count,
                                          .label_smoothing = label_smoothing, .logits_shape = ag_shape_of(logits)};
      rc = lab_node_save(n, XENT_LOGITS, xc) | lab_node_save(n, XENT_TARGETS, tg) | lab_node_save(n, XENT_LSE, lse) |
           (inv_count ? lab_node_save(n, XENT_INV_COUNT, inv_count) : 0);
    }
    out = ag_finish(n, out, rc);
  }
  ag_release_all(5, (lab_tensor *[]){tg, xc, loss, lse, inv_count});
  return out;
}
