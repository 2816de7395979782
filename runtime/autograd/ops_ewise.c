/* Gradients of elementwise ops. Broadcast operands get the gradient summed back to their
 * shape; every gradient is returned in its input's dtype. */
#include <math.h>
#include <string.h>

#include "../error.h"
#include "../ewise.h"
#include "ops.h"
#include "util.h"

/* saved: a and b (when the gradient reads them), the output y (div, pow, remainder) */
enum { BIN_A, BIN_B, BIN_Y };
typedef struct {
  lab_binary_op op;
  ag_shape a_shape, b_shape; /* each gradient is summed back over what was broadcast */
} binary_ctx;

static int binary_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const binary_ctx *c = AG_CTX(n, binary_ctx);
  lab_binary_op op = c->op;
  lab_tensor *a = n->saved[BIN_A], *b = n->saved[BIN_B], *y = n->saved[BIN_Y];
  lab_tensor *ga = NULL, *gb = NULL;
  int wa = ag_wants(n, 0), wb = ag_wants(n, 1);
  switch (op) {
  case LAB_ADD:
    if (wa) ga = ag_ref(g);
    if (wb) gb = ag_ref(g);
    break;
  case LAB_SUB:
    if (wa) ga = ag_ref(g);
    if (wb) gb = lab_unary(LAB_NEG, g);
    break;
  case LAB_MUL:
    if (wa) ga = lab_binary(LAB_MUL, g, b, -1);
    if (wb) gb = lab_binary(LAB_MUL, g, a, -1);
    break;
  case LAB_DIV: /* y = a / b: da = g / b, db = -g y / b */
    if (wa) ga = lab_binary(LAB_DIV, g, b, -1);
    if (wb) gb = ag_chain(ag_chain(lab_binary(LAB_MUL, g, y, -1), LAB_DIV, b, 0), LAB_MUL, NULL, -1.0);
    break;
  case LAB_POW: /* y = a^b: da = g b a^(b-1) = g b y / a; db = g y log a */
    if (wa) {
      lab_tensor *bm1 = ag_scalar_op(b, LAB_SUB, 1.0);
      lab_tensor *p = bm1 ? lab_binary(LAB_POW, a, bm1, -1) : NULL;
      lab_tensor *gbp = p ? lab_binary(LAB_MUL, g, b, -1) : NULL;
      ga = gbp ? lab_binary(LAB_MUL, gbp, p, -1) : NULL;
      lab_tensor_release(bm1);
      lab_tensor_release(p);
      lab_tensor_release(gbp);
    }
    if (wb) {
      lab_tensor *la = lab_unary(LAB_LOG, a);
      gb = la ? ag_chain(lab_binary(LAB_MUL, g, y, -1), LAB_MUL, la, 0) : NULL;
      lab_tensor_release(la);
    }
    break;
  case LAB_REMAINDER: /* y = a - floor(a/b) b: da = g, db = -g floor(a/b) = -g (a - y) / b */
    if (wa) ga = ag_ref(g);
    if (wb) {
      lab_tensor *q = lab_binary(LAB_SUB, a, y, -1);
      lab_tensor *qb = q ? lab_binary(LAB_DIV, q, b, -1) : NULL;
      lab_tensor *gq = qb ? lab_binary(LAB_MUL, g, qb, -1) : NULL;
      gb = gq ? lab_unary(LAB_NEG, gq) : NULL;
      lab_tensor_release(q);
      lab_tensor_release(qb);
      lab_tensor_release(gq);
    }
    break;
  case LAB_MAXIMUM:
  case LAB_MINIMUM: { /* the larger (smaller) input takes the gradient; ties share it */
    lab_tensor *gt = lab_binary(op == LAB_MAXIMUM ? LAB_GT : LAB_LT, a, b, -1);
    lab_tensor *eq = lab_binary(LAB_EQ, a, b, -1);
    lab_tensor *half = lab_tensor_scalar(LAB_F32, 0.5);
    lab_tensor *eqh = (eq && half) ? lab_binary(LAB_MUL, eq, half, g->dtype) : NULL;
    lab_tensor *wa_ = (gt && eqh) ? lab_binary(LAB_ADD, gt, eqh, g->dtype) : NULL;
    if (wa && wa_) ga = lab_binary(LAB_MUL, g, wa_, -1);
    if (wb && wa_) {
      lab_tensor *one = lab_tensor_scalar(g->dtype, 1.0);
      lab_tensor *wb_ = one ? lab_binary(LAB_SUB, one, wa_, -1) : NULL;
      gb = wb_ ? lab_binary(LAB_MUL, g, wb_, -1) : NULL;
      lab_tensor_release(one);
      lab_tensor_release(wb_);
    }
    lab_tensor_release(gt);
    lab_tensor_release(eq);
    lab_tensor_release(half);
    lab_tensor_release(eqh);
    lab_tensor_release(wa_);
    break;
  }
  default:
    return lab_fail("backward", "%s is not differentiable", lab_binary_name(op));
  }
  if ((wa && !ga) || (wb && !gb)) {
    lab_tensor_release(ga);
    lab_tensor_release(gb);
    return -1;
  }
  if (ga) gin[0] = ag_to_input(n, 0, ga, &c->a_shape);
  if (gb) gin[1] = ag_to_input(n, 1, gb, &c->b_shape);
  return (wa && !gin[0]) || (wb && !gin[1]) ? -1 : 0;
}

lab_tensor *lab_ad_binary(lab_binary_op op, lab_tensor *a, lab_tensor *b, int out_dtype) {
  lab_tensor *out = lab_binary(op, a, b, out_dtype);
  lab_tensor *in[2] = {a, b};
  if (!out || !lab_ag_needed(2, in)) return out;
  /* comparisons have no gradient; floor division's is zero almost everywhere (PyTorch) */
  if ((op >= LAB_EQ && op <= LAB_GE) || op == LAB_FLOOR_DIV) return out;
  lab_node *n = lab_node_new(lab_binary_name(op), binary_bw, 2, in);
  if (!n) return ag_drop(out);
  *AG_CTX(n, binary_ctx) = (binary_ctx){.op = op, .a_shape = ag_shape_of(a), .b_shape = ag_shape_of(b)};
  int rc = 0;
  if (op == LAB_MUL || op == LAB_POW || op == LAB_MAXIMUM || op == LAB_MINIMUM || op == LAB_REMAINDER) {
    rc |= lab_node_save(n, BIN_A, a);
    rc |= lab_node_save(n, BIN_B, b);
  }
  if (op == LAB_DIV) rc |= lab_node_save(n, BIN_B, b);
  if (op == LAB_DIV || op == LAB_POW || op == LAB_REMAINDER) rc |= lab_node_save(n, BIN_Y, out);
  return ag_finish(n, out, rc);
}

enum { UN_X, UN_Y }; /* saved: the input or the output, whichever the derivative reads */
typedef struct {
  lab_unary_op op;
} unary_ctx;

static int unary_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  lab_unary_op op = AG_CTX(n, unary_ctx)->op;
  lab_tensor *x = n->saved[UN_X], *y = n->saved[UN_Y], *r = NULL;
  switch (op) {
  case LAB_NEG: r = lab_unary(LAB_NEG, g); break;
  case LAB_ABS: {
    lab_tensor *sign = ag_sign(x);
    r = sign ? lab_binary(LAB_MUL, g, sign, -1) : NULL;
    lab_tensor_release(sign);
    break;
  }
  case LAB_EXP: r = lab_binary(LAB_MUL, g, y, -1); break;
  case LAB_LOG: r = lab_binary(LAB_DIV, g, x, -1); break;
  case LAB_SQRT: r = ag_chain(lab_binary(LAB_DIV, g, y, -1), LAB_MUL, NULL, 0.5); break;
  case LAB_RSQRT: { /* d/dx x^-1/2 = -1/2 y^3 */
    lab_tensor *y3 = ag_chain(lab_binary(LAB_MUL, y, y, -1), LAB_MUL, y, 1.0);
    r = y3 ? ag_chain(lab_binary(LAB_MUL, g, y3, -1), LAB_MUL, NULL, -0.5) : NULL;
    lab_tensor_release(y3);
    break;
  }
  case LAB_TANH: { /* 1 - y^2 */
    lab_tensor *y2 = lab_binary(LAB_MUL, y, y, -1);
    lab_tensor *d = y2 ? ag_scalar_rsub(1.0, y2) : NULL;
    r = d ? lab_binary(LAB_MUL, g, d, -1) : NULL;
    lab_tensor_release(y2);
    lab_tensor_release(d);
    break;
  }
  case LAB_SIGMOID: { /* y (1 - y) */
    lab_tensor *omy = ag_scalar_rsub(1.0, y);
    lab_tensor *d = omy ? lab_binary(LAB_MUL, y, omy, -1) : NULL;
    r = d ? lab_binary(LAB_MUL, g, d, -1) : NULL;
    lab_tensor_release(omy);
    lab_tensor_release(d);
    break;
  }
  default: break;
  }
  if (!r) return -1;
  gin[0] = ag_cast(r, n->in_dtype[0]);
  return gin[0] ? 0 : -1;
}

lab_tensor *lab_ad_unary(lab_unary_op op, lab_tensor *a) {
  lab_tensor *out = lab_unary(op, a);
  if (!out || !lab_ag_needed(1, &a)) return out;
  lab_node *n = lab_node_new(lab_unary_name(op), unary_bw, 1, &a);
  if (!n) return ag_drop(out);
  *AG_CTX(n, unary_ctx) = (unary_ctx){.op = op};
  int rc = 0;
  if (op == LAB_ABS || op == LAB_LOG) rc |= lab_node_save(n, UN_X, a);
  if (op == LAB_EXP || op == LAB_SQRT || op == LAB_RSQRT || op == LAB_TANH || op == LAB_SIGMOID)
    rc |= lab_node_save(n, UN_Y, out);
  return ag_finish(n, out, rc);
}

/* gradient passes where lo <= x <= hi; saved: x */
typedef struct {
  int has[2];      /* a lower bound, an upper bound */
  double bound[2]; /* lo, hi */
} clamp_ctx;

static int clamp_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const clamp_ctx *c = AG_CTX(n, clamp_ctx);
  lab_tensor *x = n->saved[0];
  lab_tensor *mask = lab_tensor_full_on(lab_device_of(x), g->dtype, x->ndim, x->shape, 1.0);
  if (!mask) return -1;
  int rc = 0;
  for (int k = 0; k < 2 && rc == 0; k++) {
    if (!c->has[k]) continue;
    lab_tensor *bound = lab_tensor_scalar(LAB_F64, c->bound[k]);
    lab_tensor *ok = bound ? lab_binary(k == 0 ? LAB_GE : LAB_LE, x, bound, g->dtype) : NULL;
    rc = ok ? lab_binary_(LAB_MUL, mask, ok) : -1;
    lab_tensor_release(bound);
    lab_tensor_release(ok);
  }
  lab_tensor *r = rc == 0 ? lab_binary(LAB_MUL, g, mask, -1) : NULL;
  lab_tensor_release(mask);
  gin[0] = r ? ag_cast(r, n->in_dtype[0]) : NULL;
  return gin[0] ? 0 : -1;
}

lab_tensor *lab_ad_clamp(lab_tensor *a, double lo, int has_lo, double hi, int has_hi) {
  lab_tensor *out = lab_clamp(a, lo, has_lo, hi, has_hi);
  if (!out || !lab_ag_needed(1, &a)) return out;
  lab_node *n = lab_node_new("clamp", clamp_bw, 1, &a);
  if (!n) return ag_drop(out);
  *AG_CTX(n, clamp_ctx) = (clamp_ctx){.has = {has_lo, has_hi}, .bound = {lo, hi}};
  return ag_finish(n, out, lab_node_save(n, 0, a));
}

/* inputs (cond, a, b); saved: cond */
typedef struct {
  ag_shape a_shape, b_shape;
} where_ctx;

static int where_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const where_ctx *wc = AG_CTX(n, where_ctx);
  lab_tensor *c = n->saved[0];
  lab_tensor *zero = lab_tensor_scalar(g->dtype, 0);
  if (!zero) return -1;
  if (ag_wants(n, 1)) {
    lab_tensor *r = lab_where(c, g, zero);
    gin[1] = r ? ag_to_input(n, 1, r, &wc->a_shape) : NULL;
  }
  if (ag_wants(n, 2)) {
    lab_tensor *r = lab_where(c, zero, g);
    gin[2] = r ? ag_to_input(n, 2, r, &wc->b_shape) : NULL;
  }
  lab_tensor_release(zero);
  return (ag_wants(n, 1) && !gin[1]) || (ag_wants(n, 2) && !gin[2]) ? -1 : 0;
}

lab_tensor *lab_ad_where(lab_tensor *cond, lab_tensor *a, lab_tensor *b) {
  lab_tensor *out = lab_where(cond, a, b);
  lab_tensor *in[3] = {cond, a, b};
  if (!out || !lab_ag_needed(3, in)) return out;
  lab_node *n = lab_node_new("where", where_bw, 3, in);
  if (!n) return ag_drop(out);
  *AG_CTX(n, where_ctx) = (where_ctx){.a_shape = ag_shape_of(a), .b_shape = ag_shape_of(b)};
  return ag_finish(n, out, lab_node_save(n, 0, cond));
}
