/* One attention block by the math path (the scores materialised as [..., T, S]), with the
 * FlashAttention kernels' contract: out and the f32 log-sum-exp of each query's scaled scores,
 * and the backward from (merged) out, dout and lse. lab_flash_block_fwd/bwd (ops_attention.c)
 * take it where the device's kernels refuse the case: the cuda device's tensor-core kernels
 * take only bf16/f16 at head dims 64 and 128, so ring attention's f32 blocks of head dim 4
 * (tests/lua/test_cp.lua) had no path on cuda, nor on the sim that runs the cuda device's code.
 * Built from device ops (matmul, elementwise, reductions, the causal mask kernel), so it runs
 * on every device; sums in f32 (f64 for f64 inputs).
 *
 * A query that sees no key (causal, T > S) gets out = 0 and lse = -inf, as the kernels give:
 * the row maximum is clamped to a finite value before it is subtracted (-inf - -inf is NaN),
 * and the softmax denominator to 1 (it is at least 1 wherever a key is seen: the maximum's own
 * term), so an empty row divides 0 by 1. */
#include <float.h>

#include "../error.h"
#include "../matmul.h"
#include "../reduce.h"
#include "../transfer.h"
#include "attention_block_math.h"
#include "util.h"

/* x op y, consuming x (and y when own_y); NULL on failure (either NULL in: NULL out) */
static lab_tensor *take(lab_tensor *x, lab_binary_op op, lab_tensor *y, int own_y) {
  lab_tensor *r = x && y ? lab_binary(op, x, y, -1) : NULL;
  lab_tensor_release(x);
  if (own_y) lab_tensor_release(y);
  return r;
}

/* a op(b) with b's last two dims swapped when tb (a's when ta) */
static lab_tensor *mm(lab_tensor *a, lab_tensor *b, int ta, int tb) {
  if (!a || !b) return NULL;
  lab_tensor *A = ta ? lab_transpose(a, a->ndim - 2, a->ndim - 1) : ag_ref(a);
  lab_tensor *B = tb ? lab_transpose(b, b->ndim - 2, b->ndim - 1) : ag_ref(b);
  lab_tensor *c = A && B ? lab_matmul(A, B) : NULL;
  lab_tensor_release(A);
  lab_tensor_release(B);
  return c;
}

static lab_tensor *as_ct(lab_tensor *t, lab_dtype ct) {
  lab_tensor *c = lab_to_dtype(t, ct);
  lab_tensor *cc = c ? lab_contiguous(c) : NULL;
  lab_tensor_release(c);
  return cc;
}

/* the scaled, masked scores q k^T * scale [..., T, S] in ct */
static lab_tensor *scores(lab_tensor *q, lab_tensor *k, int causal, double scale, lab_dtype ct) {
  lab_tensor *s = mm(q, k, 0, 1);
  lab_tensor *sc = s ? lab_tensor_scalar(ct, scale) : NULL;
  if (!sc || lab_binary_(LAB_MUL, s, sc) < 0) s = ag_drop(s);
  lab_tensor_release(sc);
  int64_t T = q->shape[q->ndim - 2], S = k->shape[k->ndim - 2];
  if (s && causal && T > 0 && S > 0 && lab_ops_of(s)->causal_mask(ct, lab_data(s), lab_numel(s) / (T * S), T, S) < 0)
    s = ag_drop(s);
  return s;
}

/* the row maximum of s [..., T, 1], clamped finite */
static lab_tensor *row_max(lab_tensor *s) {
  lab_tensor *m = NULL, *ix = NULL;
  if (lab_reduce_ext(s, s->ndim - 1, 1, 1, &m, &ix) < 0) return NULL;
  lab_tensor_release(ix);
  if (lab_clamp_(m, -FLT_MAX, 1, 0, 0) < 0) m = ag_drop(m);
  return m;
}

static lab_tensor *cast_release(lab_tensor *t, lab_dtype dt) {
  lab_tensor *c = t ? lab_to_dtype(t, dt) : NULL;
  lab_tensor_release(t);
  return c;
}

int lab_attn_block_math_fwd(lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale, lab_tensor **out,
                            lab_tensor **lse) {
  lab_dtype ct = q->dtype == LAB_F64 ? LAB_F64 : LAB_F32;
  *out = *lse = NULL;
  lab_tensor *qc = as_ct(q, ct), *kc = as_ct(k, ct), *vc = as_ct(v, ct);
  lab_tensor *s = qc && kc && vc ? scores(qc, kc, causal, scale, ct) : NULL;
  lab_tensor *m = s ? row_max(s) : NULL;
  lab_tensor *e = m ? take(ag_ref(s), LAB_SUB, m, 0) : NULL; /* s - m */
  if (e && lab_unary_(LAB_EXP, e) < 0) e = ag_drop(e);
  lab_tensor *z = e ? lab_reduction(LAB_R_SUM, e, e->ndim - 1, 1, 0) : NULL; /* [..., T, 1] */
  lab_tensor *l = z ? lab_unary(LAB_LOG, z) : NULL;
  l = take(l, LAB_ADD, m, 0); /* lse = m + log z */
  if (z && lab_clamp_(z, 1, 1, 0, 0) < 0) z = ag_drop(z);
  lab_tensor *o = take(mm(e, vc, 0, 0), LAB_DIV, z, 0);
  int rc = o && l ? 0 : -1;
  if (rc == 0) {
    *out = cast_release(o, q->dtype), o = NULL;
    lab_tensor *l1 = lab_squeeze(l, l->ndim - 1);
    *lse = l1 ? as_ct(l1, LAB_F32) : NULL;
    lab_tensor_release(l1);
    if (!*out || !*lse) {
      *out = ag_drop(*out), *lse = ag_drop(*lse);
      rc = -1;
    }
  }
  lab_tensor *all[] = {qc, kc, vc, s, m, e, z, l, o};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lab_tensor_release(all[i]);
  return rc;
}

/* P = exp(s - lse) from the saved lse; dv = P^T dout; dS = P (dout v^T - rowsum(dout o));
 * dq = dS k scale; dk = dS^T q scale */
int lab_attn_block_math_bwd(lab_tensor *q, lab_tensor *k, lab_tensor *v, lab_tensor *out, lab_tensor *dout,
                            lab_tensor *lse, int causal, double scale, lab_tensor **dq, lab_tensor **dk,
                            lab_tensor **dv) {
  lab_dtype ct = q->dtype == LAB_F64 ? LAB_F64 : LAB_F32;
  *dq = *dk = *dv = NULL;
  lab_tensor *qc = as_ct(q, ct), *kc = as_ct(k, ct), *vc = as_ct(v, ct);
  lab_tensor *oc = as_ct(out, ct), *gc = as_ct(dout, ct), *lc = as_ct(lse, ct);
  int64_t lshape[LAB_MAX_DIMS];
  for (int d = 0; d < q->ndim - 1; d++) lshape[d] = q->shape[d];
  lshape[q->ndim - 1] = 1;
  lab_tensor *lv = lc ? lab_view(lc, q->ndim, lshape) : NULL; /* [..., T, 1]; lc may be the caller's lse */
  lab_tensor *l = lv ? lab_clamp(lv, -FLT_MAX, 1, 0, 0) : NULL;
  lab_tensor *s = qc && kc && vc && oc && gc && l ? scores(qc, kc, causal, scale, ct) : NULL;
  lab_tensor *P = s ? take(ag_ref(s), LAB_SUB, l, 0) : NULL;
  if (P && lab_unary_(LAB_EXP, P) < 0) P = ag_drop(P);
  lab_tensor *gv = mm(P, gc, 1, 0);
  lab_tensor *dP = mm(gc, vc, 0, 1);
  lab_tensor *go = oc && gc ? lab_binary(LAB_MUL, gc, oc, -1) : NULL;
  lab_tensor *D = go ? lab_reduction(LAB_R_SUM, go, go->ndim - 1, 1, 0) : NULL;
  lab_tensor *dS = take(take(dP, LAB_SUB, D, 0), LAB_MUL, P, 0);
  lab_tensor *sc = lab_tensor_scalar(ct, scale);
  lab_tensor *gq = take(mm(dS, kc, 0, 0), LAB_MUL, sc, 0);
  lab_tensor *gk = take(mm(dS, qc, 1, 0), LAB_MUL, sc, 0);
  int rc = gq && gk && gv ? 0 : -1;
  if (rc == 0) {
    *dq = cast_release(gq, q->dtype), *dk = cast_release(gk, k->dtype), *dv = cast_release(gv, v->dtype);
    gq = gk = gv = NULL;
    if (!*dq || !*dk || !*dv) {
      *dq = ag_drop(*dq), *dk = ag_drop(*dk), *dv = ag_drop(*dv);
      rc = -1;
    }
  }
  lab_tensor *all[] = {qc, kc, vc, oc, gc, lc, lv, l, s, P, go, D, dS, sc, gq, gk, gv};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lab_tensor_release(all[i]);
  return rc;
}
