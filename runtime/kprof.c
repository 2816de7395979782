/* The kernel profiler (kprof.h): a copy of the cpu device table whose entries time the plain
 * kernel around the call. Process CPU time is read with the wall clock so a kernel whose
 * threads wait (for a core held by another rank, say) shows it as wall minus CPU. */
#include "kprof.h"

#include <time.h>

#include "device.h"

static lab_device_ops timed;             /* the timing table */
static const lab_device_ops *plain;      /* the cpu kernels themselves */
static lab_kp_total totals[LAB_KP_NCATS];
static int enabled;

static const char *names[LAB_KP_NCATS] = {"gemm",       "attention", "norm", "activation", "elementwise",
                                          "embedding", "loss",      "optimizer"};

typedef struct {
  struct timespec wall, cpu;
} stamp;

static stamp now(void) {
  stamp s;
  clock_gettime(CLOCK_MONOTONIC, &s.wall);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &s.cpu);
  return s;
}

static double secs(struct timespec a, struct timespec b) {
  return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

static void add(lab_kp_category c, stamp t0) {
  stamp t1 = now();
  totals[c].calls++;
  totals[c].wall += secs(t0.wall, t1.wall);
  totals[c].cpu += secs(t0.cpu, t1.cpu);
}

/* one wrapper per kernel entry: time the plain kernel and book it under its category */
static int t_copy(int index, void *dst, const void *src, size_t n) {
  stamp t = now();
  int rc = plain->copy(index, dst, src, n);
  add(LAB_KP_ELEMENTWISE, t);
  return rc;
}
static int t_memset(int index, void *dst, int byte, size_t n) {
  stamp t = now();
  int rc = plain->memset(index, dst, byte, n);
  add(LAB_KP_ELEMENTWISE, t);
  return rc;
}
static void t_ewise(const lab_ew_args *a) {
  stamp t = now();
  plain->ewise(a);
  add(LAB_KP_ELEMENTWISE, t);
}
static void t_reduce(const lab_red_args *a) {
  stamp t = now();
  plain->reduce(a);
  add(LAB_KP_ELEMENTWISE, t);
}
static void t_sum_middle(lab_dtype ct, const void *x, void *out, int64_t outer, int64_t R, int64_t inner,
                         double scale) {
  stamp t = now();
  plain->sum_middle(ct, x, out, outer, R, inner, scale);
  add(LAB_KP_ELEMENTWISE, t);
}
static void t_softmax_rows(lab_dtype ct, const void *x, void *out, int64_t rows, int64_t n, int log) {
  stamp t = now();
  plain->softmax_rows(ct, x, out, rows, n, log);
  add(LAB_KP_ATTENTION, t);
}
static int t_gemm(const lab_gemm_args *a) {
  stamp t = now();
  int rc = plain->gemm(a);
  add(LAB_KP_GEMM, t);
  return rc;
}
static void t_rand(const lab_rand_args *a) {
  stamp t = now();
  plain->rand(a);
  add(LAB_KP_ELEMENTWISE, t);
}
static void t_layer_norm_fwd(lab_dtype ct, const void *x, const void *w, const void *b, void *y, void *mean,
                             void *rstd, int64_t rows, int64_t D, double eps) {
  stamp t = now();
  plain->layer_norm_fwd(ct, x, w, b, y, mean, rstd, rows, D, eps);
  add(LAB_KP_NORM, t);
}
static void t_layer_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *mean,
                             const void *rstd, void *dx, void *dw, void *db, int64_t rows, int64_t D) {
  stamp t = now();
  plain->layer_norm_bwd(ct, g, x, w, mean, rstd, dx, dw, db, rows, D);
  add(LAB_KP_NORM, t);
}
static void t_rms_norm_fwd(lab_dtype ct, const void *x, const void *w, void *y, void *rstd, int64_t rows,
                           int64_t D, double eps) {
  stamp t = now();
  plain->rms_norm_fwd(ct, x, w, y, rstd, rows, D, eps);
  add(LAB_KP_NORM, t);
}
static void t_rms_norm_bwd(lab_dtype ct, const void *g, const void *x, const void *w, const void *rstd, void *dx,
                           void *dw, int64_t rows, int64_t D) {
  stamp t = now();
  plain->rms_norm_bwd(ct, g, x, w, rstd, dx, dw, rows, D);
  add(LAB_KP_NORM, t);
}
static void t_act_fwd(lab_dtype ct, lab_act_kind kind, const void *x, void *y, int64_t n) {
  stamp t = now();
  plain->act_fwd(ct, kind, x, y, n);
  add(LAB_KP_ACTIVATION, t);
}
static void t_act_bwd(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, int64_t n) {
  stamp t = now();
  plain->act_bwd(ct, kind, g, x, dx, n);
  add(LAB_KP_ACTIVATION, t);
}
static void t_act_bwd_bias(lab_dtype ct, lab_act_kind kind, const void *g, const void *x, void *dx, void *db,
                           int64_t rows, int64_t cols) {
  stamp t = now();
  plain->act_bwd_bias(ct, kind, g, x, dx, db, rows, cols);
  add(LAB_KP_ACTIVATION, t);
}
static int64_t t_xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse,
                          int64_t N, int64_t C, int64_t ignore_index, double smoothing) {
  stamp t = now();
  int64_t r = plain->xent_fwd(ct, logits, target, loss, lse, N, C, ignore_index, smoothing);
  add(LAB_KP_LOSS, t);
  return r;
}
static void t_xent_bwd(lab_dtype ct, const void *logits, const int64_t *target, const void *lse, void *dlogits,
                       int64_t N, int64_t C, int64_t ignore_index, double smoothing, double scale) {
  stamp t = now();
  plain->xent_bwd(ct, logits, target, lse, dlogits, N, C, ignore_index, smoothing, scale);
  add(LAB_KP_LOSS, t);
}
static void t_embedding_fwd(lab_dtype ct, const void *weight, const int64_t *idx, void *out, int64_t n,
                            int64_t D) {
  stamp t = now();
  plain->embedding_fwd(ct, weight, idx, out, n, D);
  add(LAB_KP_EMBEDDING, t);
}
static void t_embedding_bwd(lab_dtype ct, const void *g, const int64_t *idx, void *dweight, int64_t n,
                            int64_t D) {
  stamp t = now();
  plain->embedding_bwd(ct, g, idx, dweight, n, D);
  add(LAB_KP_EMBEDDING, t);
}
static void t_causal_mask(lab_dtype ct, void *scores, int64_t batches, int64_t T, int64_t S) {
  stamp t = now();
  plain->causal_mask(ct, scores, batches, T, S);
  add(LAB_KP_ATTENTION, t);
}
static void t_softmax_bwd_rows(lab_dtype ct, const void *P, void *dP, int64_t rows, int64_t S, double scale) {
  stamp t = now();
  plain->softmax_bwd_rows(ct, P, dP, rows, S, scale);
  add(LAB_KP_ATTENTION, t);
}
static void t_adamw(lab_dtype ct, void *p, const void *g, void *m, void *v, int64_t n, double lr, double b1,
                    double b2, double eps, double wd, int64_t step) {
  stamp t = now();
  plain->adamw(ct, p, g, m, v, n, lr, b1, b2, eps, wd, step);
  add(LAB_KP_OPTIMIZER, t);
}

static int t_flash_fwd(const lab_flash_args *a) {
  stamp t = now();
  int rc = plain->flash_fwd(a);
  add(LAB_KP_ATTENTION, t);
  return rc;
}
static int t_flash_bwd(const lab_flash_args *a) {
  stamp t = now();
  int rc = plain->flash_bwd(a);
  add(LAB_KP_ATTENTION, t);
  return rc;
}

static void t_adamw_multi(lab_dtype ct, int count, void *const *p, const void *const *g, void *const *m,
                          void *const *v, const int64_t *n, const double *wd, double lr, double b1, double b2,
                          double eps, int64_t step) {
  stamp t = now();
  plain->adamw_multi(ct, count, p, g, m, v, n, wd, lr, b1, b2, eps, step);
  add(LAB_KP_OPTIMIZER, t);
}

void lab_kprof_reset(void) {
  for (int c = 0; c < LAB_KP_NCATS; c++) totals[c] = (lab_kp_total){0, 0, 0};
}

void lab_kprof_enable(int on) {
  if (!plain) plain = lab_cpu_device_ops();
  lab_kprof_reset();
  enabled = on != 0;
  if (!enabled) {
    lab_device_register(LAB_DEV_CPU, plain);
    return;
  }
  timed = *plain; /* entries without a wrapper (allocation, counts) stay the plain ones */
  timed.copy = t_copy;
  timed.to_host = t_copy;
  timed.from_host = t_copy;
  timed.memset = t_memset;
  timed.ewise = t_ewise;
  timed.reduce = t_reduce;
  timed.sum_middle = t_sum_middle;
  timed.softmax_rows = t_softmax_rows;
  timed.gemm = t_gemm;
  timed.rand = t_rand;
  timed.layer_norm_fwd = t_layer_norm_fwd;
  timed.layer_norm_bwd = t_layer_norm_bwd;
  timed.rms_norm_fwd = t_rms_norm_fwd;
  timed.rms_norm_bwd = t_rms_norm_bwd;
  timed.act_fwd = t_act_fwd;
  timed.act_bwd = t_act_bwd;
  if (plain->act_bwd_bias) timed.act_bwd_bias = t_act_bwd_bias;
  timed.xent_fwd = t_xent_fwd;
  timed.xent_bwd = t_xent_bwd;
  timed.embedding_fwd = t_embedding_fwd;
  timed.embedding_bwd = t_embedding_bwd;
  timed.causal_mask = t_causal_mask;
  timed.softmax_bwd_rows = t_softmax_bwd_rows;
  timed.adamw = t_adamw;
  if (plain->adamw_multi) timed.adamw_multi = t_adamw_multi;
  if (plain->flash_fwd) timed.flash_fwd = t_flash_fwd;
  if (plain->flash_bwd) timed.flash_bwd = t_flash_bwd;
  lab_device_register(LAB_DEV_CPU, &timed);
}

int lab_kprof_enabled(void) { return enabled; }

lab_kp_total lab_kprof_total(lab_kp_category c) {
  if ((unsigned)c >= LAB_KP_NCATS) return (lab_kp_total){0, 0, 0};
  return totals[c];
}

const char *lab_kprof_category_name(lab_kp_category c) {
  return (unsigned)c < LAB_KP_NCATS ? names[c] : "?";
}
