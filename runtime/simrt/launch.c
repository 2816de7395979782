/* The launchers runtime/cuda/cuda_device.c calls (lab_cu_*, renamed lab_simrt_cu_* by
 * shim/cuda_runtime.h) for the sim: kernels/cuda under the SIMT interpreter (lab_simcu_*,
 * kernels/simt/launch_sim.h) with every pointer argument on the arena's kernel view.
 *
 * A launch is stream work, as on a GPU: the emulation header (kernels/simt/cuda_sim.h) captures
 * each kernel's arguments by value and hands it to this file's queue, which puts it on the
 * stream's worker thread after the copies, memsets, products and waits before it. So a kernel
 * runs when its stream reaches it, and work on another stream that does not wait for it (an
 * event, a synchronize) reads what was there before the kernel wrote. What a launch gets wrong
 * in itself (a configuration a GPU refuses, a pointer argument on another device than the
 * stream's) fails at the launch, naming the launcher and the pointer; what the kernel does
 * (an interpreter report) fails when the stream runs it, and is sticky as a fault in a CUDA
 * context: the stream's next synchronize returns it (the copy that reads a void op's result
 * fails), launches made until then return it, and the kernels queued behind it do not run. The
 * interpreter's report is the error's text (cudaGetErrorString). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../kernels/simt/launch_sim.h"
#include "../../kernels/simt/simt.h"
#include "../device_sim.h" /* lab_sim_flash_view */
#include "shim/cuda_runtime.h"
#include "simrt_internal.h"

/* ---- the queue the interpreter's launches go to ---- */

typedef struct {
  lab_simt_work *w;
} queued;

static int run_queued(void *arg) {
  lab_simt_work *w = ((queued *)arg)->w;
  int e = lab_simrt_sticky();
  if (!e) { /* after a fault the context is lost: nothing more runs until it is reported */
    e = w->run(w);
    if (e == cudaErrorLaunchFailure) {
      lab_simrt_note_failure(lab_simt_last_report());
      lab_simrt_set_sticky(e);
    }
  }
  w->drop(w);
  return e;
}

static int enqueue_work(void *stream, lab_simt_work *w) {
  queued *q = malloc(sizeof *q);
  if (!q) {
    w->drop(w);
    return cudaErrorMemoryAllocation;
  }
  q->w = w;
  /* the queue frees its argument (q) with free() after running it, or at once when it cannot
   * take it; the work itself is dropped by run_queued, or here */
  int e = (int)lab_simrt_enqueue((cudaStream_t)stream, run_queued, q);
  if (e) w->drop(w);
  return e;
}

/* the readers of lab_simt's tables (stats, coverage) wait for queued kernels, not on a stream's
 * own worker (it would wait for itself), and at most 30 s (a stream stuck behind an NCCL peer
 * that is gone: what is read then lacks its kernels) */
static void sync_queued(void) {
  if (!lab_simrt_on_worker() && lab_simrt_sync_all_for(30) < 0)
    fprintf(stderr, "sim: the interpreter's tables read after 30 s without every queued kernel run\n");
}

static void set_queue(void) { lab_simt_set_queue(enqueue_work, sync_queued); }

/* ---- one launch: its stream's device, and every pointer argument checked against it ---- */

typedef struct {
  const char *launcher; /* "layer_norm_fwd" */
  int device;           /* the stream's */
  const void *bad;      /* the first pointer argument on another device */
  int bad_device;
} launch;

/* the launch being made on this thread, for LAB_P (the fused kernels' pointer arguments) */
static __thread launch *current;

static launch begin(cudaStream_t s, const char *launcher) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, set_queue);
  return (launch){launcher, lab_simrt_stream_device(s), NULL, 0};
}

/* p on the kernel view; a device pointer of another device than the launch's is noted */
static void *arg_of(launch *l, const void *p) {
  int d = lab_simrt_device_of(p);
  if (d >= 0 && d != l->device && !l->bad) l->bad = p, l->bad_device = d;
  return lab_simrt_kview(p);
}
static void *current_arg(const void *p) { return arg_of(current, p); }

/* 0 when the launch may go on; else its error, with the text cudaGetErrorString gives */
static int refused(const launch *l) {
  if (l->bad) {
    char text[300];
    snprintf(text, sizeof text,
             "sim: kernel launch %s on sim:%d's stream: pointer argument %p is memory of sim:%d (a kernel "
             "reads only its own device's memory; no peer access on the sim)",
             l->launcher, l->device, l->bad, l->bad_device);
    lab_simrt_note_failure(text);
    return cudaErrorLaunchFailure;
  }
  return lab_simrt_sticky();
}

int lab_simrt_cu_ewise(const lab_ew_args *a, cudaStream_t s) {
  launch l = begin(s, "ewise");
  lab_ew_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = arg_of(&l, a->g.data[i]);
  int e = refused(&l);
  return e ? e : (lab_simcu_ewise(&k, s));
}
int lab_simrt_cu_reduce(const lab_red_args *a, cudaStream_t s) {
  launch l = begin(s, "reduce");
  lab_red_args k = *a;
  for (int i = 0; i < k.g.nops; i++) k.g.data[i] = arg_of(&l, a->g.data[i]);
  k.work = arg_of(&l, a->work);
  int e = refused(&l);
  return e ? e : (lab_simcu_reduce(&k, s));
}
/* the scratch sizes are the kernels' own (host arithmetic, no launch) */
size_t lab_simrt_cu_reduce_work_bytes(const lab_red_args *a) { return lab_simcu_reduce_work_bytes(a); }
int lab_simrt_cu_rand(const lab_rand_args *a, cudaStream_t s) {
  launch l = begin(s, "rand");
  lab_rand_args k = *a;
  k.out = arg_of(&l, a->out);
  int e = refused(&l);
  return e ? e : (lab_simcu_rand(&k, s));
}
/* the fused kernels (kernels/fused_ops.h), generated from their one signature: every pointer
 * argument (LAB_P) checked and put on the kernel view through the launch made on this thread.
 * The arguments are evaluated twice: once to check them (check_args ignores the values), then
 * for the call, which is made only if no pointer is on another device. */
static void check_args(int first, ...) { (void)first; }
#define LAB_P(p) current_arg(p)
#define LAUNCHER_(name, R, cpu, cat, op, anchor, work, params, args) \
  int lab_simrt_cu_##name(LAB_UNPAREN params, cudaStream_t s) {     \
    launch l = begin(s, #name);                                      \
    current = &l;                                                    \
    check_args(0, LAB_UNPAREN args);                                 \
    int e = refused(&l);                                             \
    if (!e) e = (lab_simcu_##name(LAB_UNPAREN args, s));     \
    current = NULL;                                                  \
    return e;                                                        \
  }
#define LAUNCHER_WORK_(name, R, cpu, cat, op, anchor, work, params, args)       \
  int lab_simrt_cu_##name(LAB_UNPAREN params, void *work_, cudaStream_t s) {   \
    launch l = begin(s, #name);                                                \
    current = &l;                                                              \
    check_args(0, LAB_UNPAREN args, current_arg(work_));                       \
    int e = refused(&l);                                                       \
    if (!e) e = (lab_simcu_##name(LAB_UNPAREN args, current_arg(work_), s)); \
    current = NULL;                                                            \
    return e;                                                                  \
  }
LAB_FUSED_LAUNCH(LAUNCHER_)
LAB_FUSED_WORK(LAUNCHER_WORK_)
#undef LAUNCHER_
#undef LAUNCHER_WORK_
#undef LAB_P
size_t lab_simrt_cu_sum_middle_work_bytes(int64_t outer, int64_t R, int64_t inner) {
  return lab_simcu_sum_middle_work_bytes(outer, R, inner);
}
size_t lab_simrt_cu_norm_bwd_work_bytes(int64_t rows, int64_t D) { return lab_simcu_norm_bwd_work_bytes(rows, D); }
int lab_simrt_cu_xent_fwd(lab_dtype ct, const void *logits, const int64_t *target, void *loss, void *lse, int64_t N,
                          int64_t C, int64_t ignore_index, double smoothing, int64_t *count_out, cudaStream_t s) {
  launch l = begin(s, "xent_fwd");
  const void *kl = arg_of(&l, logits);
  const int64_t *kt = arg_of(&l, target);
  void *kloss = arg_of(&l, loss), *klse = arg_of(&l, lse);
  int64_t *kc = arg_of(&l, count_out);
  int e = refused(&l);
  return e ? e : (lab_simcu_xent_fwd(ct, kl, kt, kloss, klse, N, C, ignore_index, smoothing, kc, s));
}
int lab_simrt_cu_flash_supports(lab_dtype dt, int64_t D, int64_t Dv) { return lab_simcu_flash_supports(dt, D, Dv); }
static lab_flash_args flash_args(launch *l, const lab_flash_args *a) {
  const void *ptrs[] = {a->q, a->k, a->v, a->o, a->dout, a->out, a->lse, a->dq, a->dk, a->dv, a->work};
  for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) (void)arg_of(l, ptrs[i]);
  return lab_sim_flash_view(a);
}
int lab_simrt_cu_flash_fwd(const lab_flash_args *a, cudaStream_t s) {
  launch l = begin(s, "flash_fwd");
  lab_flash_args k = flash_args(&l, a);
  int e = refused(&l);
  return e ? e : (lab_simcu_flash_fwd(&k, s));
}
int lab_simrt_cu_flash_bwd(const lab_flash_args *a, cudaStream_t s) {
  launch l = begin(s, "flash_bwd");
  lab_flash_args k = flash_args(&l, a);
  int e = refused(&l);
  return e ? e : (lab_simcu_flash_bwd(&k, s));
}
