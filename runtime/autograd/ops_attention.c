/* Scaled dot-product attention, softmax(q k^T * scale [+ causal mask]) v, in two ways:
 *   math   the scores materialised as a [..., T, S] tensor: matrix products, the mask, a row
 *          softmax; backward from the saved probabilities. Memory grows with T x S.
 *   flash  the device's FlashAttention kernels (kernels/cpu/flash_attention.c,
 *          kernels/cuda/flash_attention*.cu) through the device table: forward saves only
 *          the output and the per-query log-sum-exp, backward recomputes the scores tile by
 *          tile. Memory grows with T.
 * lab.sdpa takes flash by default where the device supports the dtype and head dims, math
 * elsewhere (f64 on the cpu, say), and either on request. */
#include <math.h>

#include "../error.h"
#include "../matmul.h"
#include "../random.h"
#include "../transfer.h"
#include "attention_block_math.h"
#include "ops.h"
#include "util.h"

static int float_check(const char *op, const char *what, const lab_tensor *t) {
  if (lab_dtype_is_float(t->dtype)) return 0;
  return lab_fail(op, "%s must be floating point, got %s", what, lab_dtype_name(t->dtype));
}

/* A contiguous copy (or t itself) of t in dtype dt. */
static lab_tensor *contiguous_as(lab_tensor *t, lab_dtype dt) {
  lab_tensor *c = lab_to_dtype(t, dt);
  if (!c) return NULL;
  lab_tensor *cc = lab_contiguous(c);
  lab_tensor_release(c);
  return cc;
}

/* ---- math: the scores materialised ---- */

static lab_tensor *mm_t(lab_tensor *a, lab_tensor *b, int ta, int tb) {
  lab_tensor *A = ta ? lab_transpose(a, a->ndim - 2, a->ndim - 1) : ag_ref(a);
  lab_tensor *B = tb ? lab_transpose(b, b->ndim - 2, b->ndim - 1) : ag_ref(b);
  lab_tensor *c = (A && B) ? lab_matmul(A, B) : NULL;
  lab_tensor_release(A);
  lab_tensor_release(B);
  return c;
}

enum { MATH_Q, MATH_K, MATH_V, MATH_P }; /* saved: q, k, v (compute type), the probabilities */
typedef struct {
  double scale;
} math_ctx;

static int math_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const math_ctx *c = AG_CTX(n, math_ctx);
  lab_tensor *q = n->saved[MATH_Q], *k = n->saved[MATH_K], *v = n->saved[MATH_V], *P = n->saved[MATH_P];
  lab_tensor *gc = lab_to_dtype(g, q->dtype);
  if (!gc) return -1;
  lab_tensor *dP = mm_t(gc, v, 0, 1); /* [.., T, S] */
  lab_tensor *dv = ag_wants(n, 2) ? mm_t(P, gc, 1, 0) : NULL;
  lab_tensor_release(gc);
  if (!dP) return -1;
  int64_t S = P->shape[P->ndim - 1];
  if (lab_ops_of(P)->softmax_bwd_rows(q->dtype, lab_data(P), lab_data(dP), lab_numel(P) / S, S, c->scale) < 0) {
    lab_tensor_release(dP);
    lab_tensor_release(dv);
    return -1;
  }
  if (ag_wants(n, 0)) gin[0] = ag_cast(lab_matmul(dP, k), n->in_dtype[0]);
  if (ag_wants(n, 1)) gin[1] = ag_cast(mm_t(dP, q, 1, 0), n->in_dtype[1]);
  if (dv) gin[2] = ag_cast(dv, n->in_dtype[2]);
  lab_tensor_release(dP);
  return (ag_wants(n, 0) && !gin[0]) || (ag_wants(n, 1) && !gin[1]) ? -1 : 0;
}

static lab_tensor *math_sdpa(lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale) {
  const char *op = "sdpa";
  int64_t T = q->shape[q->ndim - 2], S = k->shape[k->ndim - 2];
  lab_dtype ct = q->dtype == LAB_F64 ? LAB_F64 : LAB_F32;
  lab_tensor *qc = contiguous_as(q, ct), *kc = contiguous_as(k, ct), *vc = contiguous_as(v, ct);
  lab_tensor *P = (qc && kc && vc) ? mm_t(qc, kc, 0, 1) : NULL; /* [.., T, S] */
  lab_tensor *out = NULL;
  if (P) {
    lab_tensor *sc = lab_tensor_scalar(ct, scale);
    int rc = sc ? lab_binary_(LAB_MUL, P, sc) : -1;
    lab_tensor_release(sc);
    int64_t rows = lab_numel(P) / (S ? S : 1);
    if (rc == 0 && causal) rc = lab_ops_of(P)->causal_mask(ct, lab_data(P), rows / (T ? T : 1), T, S);
    if (rc == 0) rc = lab_ops_of(P)->softmax_rows(ct, lab_data(P), lab_data(P), rows, S, 0);
    lab_tensor *o = rc == 0 ? lab_matmul(P, vc) : NULL;
    out = o ? lab_to_dtype(o, q->dtype) : NULL;
    lab_tensor_release(o);
  }
  lab_tensor *in[3] = {q, k, v};
  if (out && lab_ag_needed(3, in)) {
    lab_node *n = lab_node_new(op, math_bw, 3, in);
    int rc = 0;
    if (n) {
      *AG_CTX(n, math_ctx) = (math_ctx){.scale = scale};
      rc = lab_node_save(n, MATH_Q, qc) | lab_node_save(n, MATH_K, kc) | lab_node_save(n, MATH_V, vc) |
           lab_node_save(n, MATH_P, P);
    }
    out = ag_finish(n, out, rc);
  }
  ag_release_all(4, (lab_tensor *[]){qc, kc, vc, P});
  return out;
}

/* ---- flash: the device's FlashAttention kernels ---- */

/* One attention problem as the kernels see it: q [BH, T, D], k [BH, S, D], v [BH, S, Dv]. */
typedef struct {
  lab_dtype dt;
  int64_t BH, T, S, D, Dv;
  double scale;
  int causal;
} flash_problem;

/* its launch description, the tensors and layouts still to fill in */
static lab_flash_args flash_args(const flash_problem *p) {
  return (lab_flash_args){.dt = p->dt, .BH = p->BH, .T = p->T, .S = p->S, .D = p->D, .Dv = p->Dv,
                          .scale = p->scale, .causal = p->causal,
                          .deterministic = lab_deterministic_algorithms()};
}

/* Layouts (lab_flash_layout), for devices whose kernels take them: the GPT's q, k and v are
 * head views [B, H, T, D] of one [B, T, 3C] projection, and its attention output is merged
 * back as [B, T, H, D]. Copying q, k, v contiguous, the output's transpose(2, 3):contiguous()
 * and, in the backward, dout contiguous and dq, dk, dv back through the head split cost a
 * full pass each; with layouts the kernels read and write those tensors where they are. */

/* heads: the size of the dim before the rows (1 for 2-D tensors) */
static int64_t flash_heads(const lab_tensor *t) { return t->ndim >= 3 ? t->shape[t->ndim - 3] : 1; }

/* t's layout when its rows' elements are adjacent, its rows at one stride and its batch dims
 * before the heads' fold into one stride; 0, or -1 when it must be copied contiguous */
static int flash_layout(const lab_tensor *t, lab_dtype dt, lab_flash_layout *l) {
  int nd = t->ndim;
  if (t->dtype != dt || nd < 2 || (t->shape[nd - 1] > 1 && t->stride[nd - 1] != 1)) return -1;
  l->st = t->shape[nd - 2] > 1 ? t->stride[nd - 2] : t->shape[nd - 1];
  l->sh = nd >= 3 ? t->stride[nd - 3] : 0;
  l->sb = 0;
  if (l->st <= 0 || l->sh < 0) return -1;
  int64_t expect = -1; /* the stride the next outer dim must have to fold */
  for (int d = nd - 4; d >= 0; d--) {
    if (t->shape[d] == 1) continue;
    if (expect < 0) l->sb = t->stride[d];
    else if (t->stride[d] != expect) return -1;
    expect = t->stride[d] * t->shape[d];
  }
  return 0;
}

/* t as the kernels take it: itself (a new reference) with its layout, or a contiguous copy in
 * dt (layout zero: contiguous) when the device takes no layouts or t has none */
static lab_tensor *flash_operand(lab_tensor *t, lab_dtype dt, int strided, lab_flash_layout *l) {
  *l = (lab_flash_layout){0, 0, 0};
  if (strided && flash_layout(t, dt, l) == 0) return ag_ref(t);
  *l = (lab_flash_layout){0, 0, 0};
  return contiguous_as(t, dt);
}

/* A new [..., rows, width] tensor (dims of `like`, last two replaced) for a kernel output: laid
 * out as [..., rows, H, width] in memory when `like` is (a head view: its rows further apart
 * than its heads) and the device takes layouts, so the head merge after it is free; else
 * contiguous (layout zero). */
static lab_tensor *flash_output(const lab_tensor *like, lab_dtype dt, int64_t width, int strided,
                                lab_flash_layout *l) {
  int nd = like->ndim;
  int64_t shape[LAB_MAX_DIMS];
  for (int d = 0; d < nd - 1; d++) shape[d] = like->shape[d];
  shape[nd - 1] = width;
  *l = (lab_flash_layout){0, 0, 0};
  lab_device dev = lab_device_of(like);
  int heads_view = strided && nd >= 4 && like->shape[nd - 3] > 1 && like->shape[nd - 2] > 1 &&
                   like->stride[nd - 2] > like->stride[nd - 3];
  if (!heads_view) return lab_tensor_empty_on(dev, dt, nd, shape);
  int64_t H = shape[nd - 3], rows = shape[nd - 2];
  shape[nd - 3] = rows, shape[nd - 2] = H; /* [..., rows, H, width] */
  lab_tensor *m = lab_tensor_empty_on(dev, dt, nd, shape);
  lab_tensor *v = m ? lab_transpose(m, nd - 3, nd - 2) : NULL;
  lab_tensor_release(m);
  if (v) *l = (lab_flash_layout){.sb = rows * H * width, .sh = width, .st = H * width};
  return v;
}

/* saved: q, k, v, out (dtype dt; contiguous or in their layouts) and lse (f32 [BH * T]) */
enum { FLASH_Q, FLASH_K, FLASH_V, FLASH_OUT, FLASH_LSE };
typedef struct {
  flash_problem p;
  int strided; /* the device took the tensors in their layouts */
} flash_ctx;

static int flash_bw(lab_node *n, lab_tensor *g, lab_tensor **gin) {
  const flash_ctx *c = AG_CTX(n, flash_ctx);
  lab_tensor *q = n->saved[FLASH_Q], *k = n->saved[FLASH_K], *v = n->saved[FLASH_V], *o = n->saved[FLASH_OUT];
  lab_tensor *lse = n->saved[FLASH_LSE];
  lab_dtype dt = c->p.dt;
  int strided = c->strided;
  lab_device dev = lab_device_of(q);
  lab_flash_args a = flash_args(&c->p);
  lab_tensor *gc = flash_operand(g, dt, strided, &a.ldo);
  if (strided) { /* the saved tensors are the kernels' operands as they were in the forward */
    a.H = flash_heads(q);
    if (flash_layout(q, dt, &a.lq) < 0 || flash_layout(k, dt, &a.lk) < 0 || flash_layout(v, dt, &a.lv) < 0 ||
        flash_layout(o, dt, &a.lo) < 0) {
      lab_tensor_release(gc);
      return lab_fail("sdpa_flash backward", "a saved tensor lost its layout");
    }
  }
  int64_t wn = (int64_t)(lab_flash_work_bytes(c->p.BH, c->p.T, c->p.D) / sizeof(float));
  lab_tensor *work = gc ? lab_tensor_empty_on(dev, LAB_F32, 1, &wn) : NULL;
  lab_tensor *dq = work ? flash_output(q, dt, q->shape[q->ndim - 1], strided, &a.ldq) : NULL;
  lab_tensor *dk = dq ? flash_output(k, dt, k->shape[k->ndim - 1], strided, &a.ldk) : NULL;
  lab_tensor *dv = dk ? flash_output(v, dt, v->shape[v->ndim - 1], strided, &a.ldv) : NULL;
  int rc = -1;
  if (dv) {
    a.q = lab_data(q), a.k = lab_data(k), a.v = lab_data(v), a.o = lab_data(o), a.dout = lab_data(gc);
    a.lse = lab_data(lse), a.dq = lab_data(dq), a.dk = lab_data(dk), a.dv = lab_data(dv), a.work = lab_data(work);
    rc = lab_ops_of(q)->flash_bwd(&a);
  }
  lab_tensor_release(gc);
  lab_tensor_release(work);
  if (rc == 0) {
    if (ag_wants(n, 0)) gin[0] = ag_cast(dq, n->in_dtype[0]), dq = NULL;
    if (ag_wants(n, 1)) gin[1] = ag_cast(dk, n->in_dtype[1]), dk = NULL;
    if (ag_wants(n, 2)) gin[2] = ag_cast(dv, n->in_dtype[2]), dv = NULL;
  }
  lab_tensor_release(dq);
  lab_tensor_release(dk);
  lab_tensor_release(dv);
  if (rc < 0) return -1;
  for (int i = 0; i < 3; i++)
    if (ag_wants(n, i) && !gin[i]) return -1;
  return 0;
}

static lab_tensor *flash_sdpa(lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale, lab_dtype dt) {
  int64_t T = q->shape[q->ndim - 2], S = k->shape[k->ndim - 2];
  int64_t D = q->shape[q->ndim - 1], Dv = v->shape[v->ndim - 1], BH = 1;
  for (int d = 0; d < q->ndim - 2; d++) BH *= q->shape[d];
  flash_problem p = {.dt = dt, .BH = BH, .T = T, .S = S, .D = D, .Dv = Dv, .scale = scale, .causal = causal};
  int64_t lse_n = BH * T;
  lab_device dev = lab_device_of(q);
  int strided = lab_device_ops_of(dev.type)->flash_strided;
  lab_flash_args a = flash_args(&p);
  a.H = flash_heads(q);
  lab_tensor *qc = flash_operand(q, dt, strided, &a.lq), *kc = flash_operand(k, dt, strided, &a.lk);
  lab_tensor *vc = flash_operand(v, dt, strided, &a.lv);
  lab_tensor *out = (qc && kc && vc) ? flash_output(q, dt, Dv, strided, &a.lo) : NULL;
  lab_tensor *lse = out ? lab_tensor_empty_on(dev, LAB_F32, 1, &lse_n) : NULL;
  if (lse) {
    a.q = lab_data(qc), a.k = lab_data(kc), a.v = lab_data(vc), a.out = lab_data(out), a.lse = lab_data(lse);
    if (lab_ops_of(q)->flash_fwd(&a) < 0) out = ag_drop(out);
  } else {
    out = ag_drop(out);
  }
  lab_tensor *in[3] = {q, k, v};
  if (out && lab_ag_needed(3, in)) {
    lab_node *n = lab_node_new("sdpa_flash", flash_bw, 3, in);
    int rc = 0;
    if (n) {
      *AG_CTX(n, flash_ctx) = (flash_ctx){.p = p, .strided = strided};
      rc = lab_node_save(n, FLASH_Q, qc) | lab_node_save(n, FLASH_K, kc) | lab_node_save(n, FLASH_V, vc) |
           lab_node_save(n, FLASH_OUT, out) | lab_node_save(n, FLASH_LSE, lse);
    }
    out = ag_finish(n, out, rc);
  }
  ag_release_all(4, (lab_tensor *[]){qc, kc, vc, lse});
  return out;
}

/* ---- the op ---- */

lab_tensor *lab_ad_sdpa(lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale, lab_sdpa_impl impl) {
  char a[128], b[128], c[128];
  const char *op = "sdpa";
  if (float_check(op, "q", q) < 0 || float_check(op, "k", k) < 0 || float_check(op, "v", v) < 0) return NULL;
  int ok = q->ndim >= 2 && q->ndim == k->ndim && k->ndim == v->ndim;
  for (int d = 0; ok && d < q->ndim - 2; d++) ok = q->shape[d] == k->shape[d] && k->shape[d] == v->shape[d];
  ok = ok && q->shape[q->ndim - 1] == k->shape[k->ndim - 1] && k->shape[k->ndim - 2] == v->shape[v->ndim - 2];
  if (!ok) {
    lab_fail(op, "q %s, k %s, v %s must be [..., T, D], [..., S, D], [..., S, Dv] with equal batch dims",
             lab_shape_str(q, a, sizeof a), lab_shape_str(k, b, sizeof b), lab_shape_str(v, c, sizeof c));
    return NULL;
  }
  lab_device dev;
  lab_tensor *qkv[3] = {q, k, v};
  if (lab_common_device(op, 3, qkv, &dev) < 0) return NULL;
  if (scale <= 0) scale = 1.0 / sqrt((double)q->shape[q->ndim - 1]);
  if (impl == LAB_SDPA_MATH) return math_sdpa(q, k, v, causal, scale);
  /* flash runs in one dtype: the inputs' when they agree, f32 otherwise */
  lab_dtype dt = q->dtype == k->dtype && k->dtype == v->dtype ? q->dtype : LAB_F32;
  int64_t D = q->shape[q->ndim - 1], Dv = v->shape[v->ndim - 1];
  const lab_device_ops *ops = lab_device_ops_of(dev.type);
  int supported = ops->flash_fwd && ops->flash_supports && ops->flash_supports(dt, D, Dv);
  if (supported) return flash_sdpa(q, k, v, causal, scale, dt);
  if (impl == LAB_SDPA_AUTO) return math_sdpa(q, k, v, causal, scale);
  lab_fail(op, "impl='flash' has no kernel on %s for %s with head dims %lld (q, k) and %lld (v)%s; use impl='math'",
           ops->name, lab_dtype_name(dt), (long long)D, (long long)Dv,
           dev.type == LAB_DEV_CUDA ? " (cuda: bf16 or f16, head dim 64, 96, 128 or 256 for q, k and v)"
                                    : " (cpu: f32, bf16 or f16)");
  return NULL;
}

/* ---- the kernels without autograd, for callers that merge blocks themselves ---- */

/* q [..., T, D], k [..., S, D], v [..., S, Dv] of one dtype; p gets the problem (scale and causal
 * as given, scale <= 0: 1/sqrt(D)). 0 when the device's kernels take them, 1 when the block goes by
 * the math path (attention_block_math.c), -1 after lab_fail */
static int block_check(const char *op, lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale,
                       flash_problem *p) {
  char a[128], b[128], c[128];
  int ok = q->ndim >= 2 && q->ndim == k->ndim && k->ndim == v->ndim && q->dtype == k->dtype && k->dtype == v->dtype;
  for (int d = 0; ok && d < q->ndim - 2; d++) ok = q->shape[d] == k->shape[d] && k->shape[d] == v->shape[d];
  ok = ok && q->shape[q->ndim - 1] == k->shape[k->ndim - 1] && k->shape[k->ndim - 2] == v->shape[v->ndim - 2];
  if (!ok)
    return lab_fail(op, "q %s, k %s, v %s must be [..., T, D], [..., S, D], [..., S, Dv] of one dtype",
                    lab_shape_str(q, a, sizeof a), lab_shape_str(k, b, sizeof b), lab_shape_str(v, c, sizeof c));
  lab_device dev;
  lab_tensor *qkv[3] = {q, k, v};
  if (lab_common_device(op, 3, qkv, &dev) < 0) return -1;
  const lab_device_ops *ops = lab_device_ops_of(dev.type);
  *p = (flash_problem){.dt = q->dtype, .BH = 1, .T = q->shape[q->ndim - 2], .S = k->shape[k->ndim - 2],
                       .D = q->shape[q->ndim - 1], .Dv = v->shape[v->ndim - 1], .scale = scale, .causal = causal};
  for (int d = 0; d < q->ndim - 2; d++) p->BH *= q->shape[d];
  if (p->scale <= 0) p->scale = 1.0 / sqrt((double)p->D);
  /* no kernel for the case (cuda's take bf16/f16 at head dims 64, 96, 128 and 256): the math path */
  return !ops->flash_fwd || !ops->flash_supports || !ops->flash_supports(q->dtype, p->D, p->Dv);
}

int lab_flash_block_fwd(lab_tensor *q, lab_tensor *k, lab_tensor *v, int causal, double scale, lab_tensor **out,
                        lab_tensor **lse) {
  const char *op = "flash_block";
  flash_problem p;
  *out = *lse = NULL;
  int math = block_check(op, q, k, v, causal, scale, &p);
  if (math < 0) return -1;
  if (math) return lab_attn_block_math_fwd(q, k, v, causal, p.scale, out, lse);
  lab_device dev = lab_device_of(q);
  int64_t oshape[LAB_MAX_DIMS];
  for (int d = 0; d < q->ndim; d++) oshape[d] = q->shape[d];
  oshape[q->ndim - 1] = p.Dv;
  lab_tensor *qc = lab_contiguous(q), *kc = lab_contiguous(k), *vc = lab_contiguous(v);
  lab_tensor *o = (qc && kc && vc) ? lab_tensor_empty_on(dev, q->dtype, q->ndim, oshape) : NULL;
  lab_tensor *l = o ? lab_tensor_empty_on(dev, LAB_F32, q->ndim - 1, q->shape) : NULL; /* [..., T] */
  int rc = -1;
  if (l) {
    lab_flash_args a = flash_args(&p);
    a.q = lab_data(qc), a.k = lab_data(kc), a.v = lab_data(vc), a.out = lab_data(o), a.lse = lab_data(l);
    rc = lab_ops_of(q)->flash_fwd(&a);
  }
  lab_tensor_release(qc);
  lab_tensor_release(kc);
  lab_tensor_release(vc);
  if (rc < 0) {
    lab_tensor_release(o);
    lab_tensor_release(l);
    return -1;
  }
  *out = o, *lse = l;
  return 0;
}

int lab_flash_block_bwd(lab_tensor *q, lab_tensor *k, lab_tensor *v, lab_tensor *out, lab_tensor *dout,
                        lab_tensor *lse, int causal, double scale, lab_tensor **dq, lab_tensor **dk, lab_tensor **dv) {
  const char *op = "flash_block_backward";
  char a1[128], b1[128];
  flash_problem p;
  *dq = *dk = *dv = NULL;
  int math = block_check(op, q, k, v, causal, scale, &p);
  if (math < 0) return -1;
  int ok = out->ndim == q->ndim && dout->ndim == q->ndim && out->dtype == q->dtype && dout->dtype == q->dtype &&
           lse->dtype == LAB_F32 && lab_numel(lse) == p.BH * p.T &&
           lab_numel(out) == p.BH * p.T * p.Dv && lab_numel(dout) == lab_numel(out);
  if (!ok)
    return lab_fail(op, "out and dout must be [..., T, Dv] in q's dtype and lse [..., T] f32; got out %s, lse %s",
                    lab_shape_str(out, a1, sizeof a1), lab_shape_str(lse, b1, sizeof b1));
  lab_tensor *all[6] = {q, k, v, out, dout, lse};
  lab_device dev;
  if (lab_common_device(op, 6, all, &dev) < 0) return -1;
  if (math) return lab_attn_block_math_bwd(q, k, v, out, dout, lse, causal, p.scale, dq, dk, dv);
  lab_tensor *c[6] = {0};
  int good = 1;
  for (int i = 0; i < 6; i++) good = good && (c[i] = lab_contiguous(all[i])) != NULL;
  int64_t wn = (int64_t)(lab_flash_work_bytes(p.BH, p.T, p.D) / sizeof(float));
  lab_tensor *work = good ? lab_tensor_empty_on(dev, LAB_F32, 1, &wn) : NULL;
  lab_tensor *gq = work ? lab_tensor_empty_on(dev, q->dtype, q->ndim, q->shape) : NULL;
  lab_tensor *gk = gq ? lab_tensor_empty_on(dev, k->dtype, k->ndim, k->shape) : NULL;
  lab_tensor *gv = gk ? lab_tensor_empty_on(dev, v->dtype, v->ndim, v->shape) : NULL;
  int rc = -1;
  if (gv) {
    lab_flash_args a = flash_args(&p);
    a.q = lab_data(c[0]), a.k = lab_data(c[1]), a.v = lab_data(c[2]), a.o = lab_data(c[3]), a.dout = lab_data(c[4]);
    a.lse = lab_data(c[5]), a.dq = lab_data(gq), a.dk = lab_data(gk), a.dv = lab_data(gv), a.work = lab_data(work);
    rc = lab_ops_of(q)->flash_bwd(&a);
  }
  for (int i = 0; i < 6; i++) lab_tensor_release(c[i]);
  lab_tensor_release(work);
  if (rc < 0) {
    lab_tensor_release(gq);
    lab_tensor_release(gk);
    lab_tensor_release(gv);
    return -1;
  }
  *dq = gq, *dk = gk, *dv = gv;
  return 0;
}
