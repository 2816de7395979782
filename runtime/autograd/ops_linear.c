/* The linear layer as one differentiable op, y = x W^T + b, for W [out, in] as in PyTorch.
 * Composed from matmul and add, it costs a pass to add the bias over y, and its backward a
 * transposed weight gradient that is copied again before the optimizer reads it. Here the
 * bias is the GEMM's epilogue: y is pre-filled with the bias rows and the product added with
 * beta = 1; the backward writes dW = g^T x straight in W's layout, dx = g W, and db as one
 * column-sum pass over g. x's leading dims are folded into one matrix, so it is one large GEMM
 * rather than a loop of small ones. Inputs that are not all f32 or all f64 (half types under
 * autocast, mixed dtypes) take the composed path, which converts as matmul does.
 *
 * lab_ad_linear_act adds the activation after it (an MLP's fc + GELU) as one node: the forward
 * saves the pre-activation, the backward takes act' and the bias gradient in one pass over the
 * rows (the device's act_bwd_bias) before the two GEMMs, where the separate GELU and Linear
 * nodes wrote dx of the GELU and read it again for the bias's column sums. */
#include <string.h>

#include "../error.h"
#include "../transfer.h"
#include "ops.h"
#include "util.h"

/* C [m, n] (+)= A B with A, B, C contiguous row-major (or transposed as asked), on the device of
 * `on`; with k == 0 C is left as it is (the caller filled it with the bias or zeros) */
static int gemm(const lab_tensor *on, int ta, int tb, int64_t m, int64_t n, int64_t k, const lab_tensor *a,
                int64_t lda, const lab_tensor *b, int64_t ldb, double beta, lab_tensor *c) {
  static const int64_t zero = 0;
  if (m == 0 || n == 0 || k == 0) return 0; /* C keeps what it holds (the bias or zeros) */
  lab_gemm_args g = {.ct = c->dtype, .trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb,
                     .ldc = n, .alpha = 1.0, .beta = beta, .a = lab_data(a), .b = lab_data(b), .c = lab_data(c),
                     .batches = 1, .a_off = &zero, .b_off = &zero};
  return lab_ops_of(on)->gemm(&g);
}

/* saved: x as [M, K] (contiguous, when W wants a gradient), W [N, K] (contiguous, when x
 * wants one), the pre-activation [M, N] (linear_act) */
enum { LIN_X, LIN_W, LIN_PRE };
typedef struct {
  int64_t M, K, N;      /* x [M, K] (its leading dims folded), W [N, K] */
  ag_shape x_shape;     /* x as it came, for dx */
  lab_act_kind kind;    /* the activation (linear_act) */
} linear_ctx;

/* dx, dW and db from gc, the contiguous gradient of x W^T + b [M, N]; db: the bias gradient
 * when already taken (consumed), NULL to take it here as gc's column sums */
static int linear_grads(lab_node *n, lab_tensor *gc, lab_tensor *db, lab_tensor **gin) {
  const linear_ctx *c = AG_CTX(n, linear_ctx);
  int64_t M = c->M, K = c->K, N = c->N;
  lab_device dev = lab_device_of(gc);
  lab_dtype ct = gc->dtype;
  int rc = 0;
  if (ag_wants(n, 0)) { /* dx [M, K] = g [M, N] W [N, K] */
    const ag_shape *xs = &c->x_shape;
    lab_tensor *dx = N ? lab_tensor_empty_on(dev, ct, xs->ndim, xs->dims) : lab_tensor_zeros_on(dev, ct, xs->ndim, xs->dims);
    if (!dx || gemm(gc, 0, 0, M, K, N, gc, N, n->saved[LIN_W], K, 0.0, dx) < 0) rc = -1;
    gin[0] = dx;
  }
  if (rc == 0 && ag_wants(n, 1)) { /* dW [N, K] = g^T [N, M] x [M, K] */
    lab_tensor *dw = M ? lab_tensor_empty_on(dev, ct, 2, (int64_t[]){N, K}) : lab_tensor_zeros_on(dev, ct, 2, (int64_t[]){N, K});
    if (!dw || gemm(gc, 1, 0, N, K, M, gc, N, n->saved[LIN_X], K, 0.0, dw) < 0) rc = -1;
    gin[1] = dw;
  }
  if (rc == 0 && n->nin > 2 && ag_wants(n, 2)) {
    if (!db) { /* db [N] = the column sums of g [M, N] */
      db = lab_tensor_empty_on(dev, ct, 1, &N);
      if (!db || lab_ops_of(gc)->sum_middle(ct, lab_data(gc), lab_data(db), 1, M, N, 1.0) < 0) rc = -1;
    }
    gin[2] = db;
    db = NULL;
  }
  lab_tensor_release(db);
  return rc;
}

/* g as the contiguous [M, N] gradient in the node's computing dtype */
static lab_tensor *grad_in(lab_node *n, lab_tensor *g) {
  lab_tensor *gt = lab_to_dtype(g, n->in_dtype[1]), *gc = gt ? lab_contiguous(gt) : NULL;
  lab_tensor_release(gt);
  return gc;
}

static int linear_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  lab_tensor *gc = grad_in(n, g);
  if (!gc) return -1;
  int rc = linear_grads(n, gc, NULL, gin);
  lab_tensor_release(gc);
  return rc;
}

/* the activation's backward first: dpre = g act'(pre), with db in the same pass */
static int linear_act_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const linear_ctx *c = AG_CTX(n, linear_ctx);
  lab_tensor *gc = grad_in(n, g), *pre = n->saved[LIN_PRE];
  if (!gc) return -1;
  int64_t M = c->M, N = c->N;
  lab_dtype ct = gc->dtype;
  lab_act_kind kind = c->kind;
  const lab_device_ops *ops = lab_ops_of(gc);
  int want_db = n->nin > 2 && ag_wants(n, 2) && ops->act_bwd_bias;
  lab_tensor *dpre = lab_tensor_empty_on(lab_device_of(gc), ct, 2, (int64_t[]){M, N});
  lab_tensor *db = dpre && want_db ? lab_tensor_empty_on(lab_device_of(gc), ct, 1, &N) : NULL;
  int rc = dpre && (db || !want_db) ? 0 : -1;
  if (rc == 0 && want_db) rc = ops->act_bwd_bias(ct, kind, lab_data(gc), lab_data(pre), lab_data(dpre), lab_data(db), M, N);
  else if (rc == 0) rc = ops->act_bwd(ct, kind, lab_data(gc), lab_data(pre), lab_data(dpre), M * N);
  lab_tensor_release(gc);
  if (rc == 0) rc = linear_grads(n, dpre, db, gin);
  else lab_tensor_release(db);
  lab_tensor_release(dpre);
  return rc;
}

/* the same layer composed from differentiable matmul and add */
static lab_tensor *composed(lab_tensor *x, lab_tensor *w, lab_tensor *b) {
  lab_tensor *wt = lab_ad_transpose(w, 0, 1);
  lab_tensor *y = wt ? lab_ad_matmul(x, wt) : NULL;
  lab_tensor_release(wt);
  if (!y || !b) return y;
  lab_tensor *r = lab_ad_binary(LAB_ADD, y, b, -1);
  lab_tensor_release(y);
  return r;
}

/* y = x W^T + b, then the activation when act (kind) */
static lab_tensor *linear(lab_tensor *x, lab_tensor *w, lab_tensor *b, int act, lab_act_kind kind) {
  char s[128], t[128];
  const char *op = !act ? "linear" : kind == LAB_ACT_SILU ? "linear_silu" : kind == LAB_ACT_GELU ? "linear_gelu" : "linear_gelu_tanh";
  if (w->ndim != 2) {
    lab_fail(op, "weight must be [out_features, in_features], got %s", lab_shape_str(w, s, sizeof s));
    return NULL;
  }
  if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1]) {
    lab_fail(op, "input %s does not match weight %s (the input's last dim must be in_features = %lld)",
             lab_shape_str(x, s, sizeof s), lab_shape_str(w, t, sizeof t), (long long)w->shape[1]);
    return NULL;
  }
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0])) {
    lab_fail(op, "bias %s does not match weight %s (it must be [out_features] = [%lld])",
             lab_shape_str(b, s, sizeof s), lab_shape_str(w, t, sizeof t), (long long)w->shape[0]);
    return NULL;
  }
  lab_device dev;
  lab_tensor *xwb[3] = {x, w, b};
  if (lab_common_device(op, b ? 3 : 2, xwb, &dev) < 0) return NULL;
  lab_dtype ct = x->dtype;
  if ((ct != LAB_F32 && ct != LAB_F64) || w->dtype != ct || (b && b->dtype != ct)) {
    lab_tensor *y = composed(x, w, b);
    if (!y || !act) return y;
    lab_tensor *r = kind == LAB_ACT_SILU ? lab_ad_silu(y) : lab_ad_gelu(y, kind == LAB_ACT_GELU_TANH);
    lab_tensor_release(y);
    return r;
  }

  int64_t K = w->shape[1], N = w->shape[0], M = K ? lab_numel(x) / K : 0;
  if (K == 0) { /* no columns: M counts the rows from the leading dims */
    M = 1;
    for (int d = 0; d < x->ndim - 1; d++) M *= x->shape[d];
  }
  int64_t shape[LAB_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  shape[x->ndim - 1] = N;
  lab_tensor *xc = lab_contiguous(x), *wc = xc ? lab_contiguous(w) : NULL;
  lab_tensor *y = wc ? lab_tensor_empty_on(dev, ct, x->ndim, shape) : NULL;
  int rc = y ? 0 : -1;
  if (rc == 0) rc = b ? lab_copy_(y, b) : (K == 0 ? lab_fill_(y, 0) : 0); /* the epilogue: y = bias rows */
  if (rc == 0) rc = gemm(y, 0, 1, M, N, K, xc, K, wc, K, b ? 1.0 : 0.0, y);
  lab_tensor *pre = NULL; /* with act: y is the pre-activation, out its activation */
  if (rc == 0 && act) {
    pre = y;
    y = lab_tensor_empty_on(dev, ct, x->ndim, shape);
    if (!y || lab_ops_of(y)->act_fwd(ct, kind, lab_data(pre), lab_data(y), M * N) < 0) rc = -1;
  }
  lab_tensor *in[3] = {x, w, b};
  int nin = b ? 3 : 2;
  if (rc == 0 && lab_ag_needed(nin, in)) {
    lab_node *n = lab_node_new(op, act ? linear_act_bw : linear_bw, nin, in);
    int src = 0;
    if (n) {
      *AG_CTX(n, linear_ctx) = (linear_ctx){.M = M, .K = K, .N = N, .x_shape = ag_shape_of(x), .kind = kind};
      if (ag_wants(n, 1)) src |= lab_node_save(n, LIN_X, xc);
      if (ag_wants(n, 0)) src |= lab_node_save(n, LIN_W, wc);
      if (act) src |= lab_node_save(n, LIN_PRE, pre);
    }
    y = ag_finish(n, y, src);
  } else if (rc < 0) {
    y = ag_drop(y);
  }
  ag_release_all(3, (lab_tensor *[]){pre, xc, wc});
  return y;
}

lab_tensor *lab_ad_linear(lab_tensor *x, lab_tensor *w, lab_tensor *b) { return linear(x, w, b, 0, LAB_ACT_GELU); }

lab_tensor *lab_ad_linear_act(lab_tensor *x, lab_tensor *w, lab_tensor *b, lab_act_kind kind) {
  return linear(x, w, b, 1, kind);
}
