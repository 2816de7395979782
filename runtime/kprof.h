/* The kernel profiler: while enabled, every kernel of the cpu device table is timed (wall and
 * process CPU time) and its time added to one of a few categories, so a training step's time
 * can be split into GEMM, attention, norms, activations, elementwise work and the optimizer
 * by llmlab itself; what is not in a kernel (autograd bookkeeping, allocation, Lua) is the
 * step's time minus the sum. Off by default: then the cpu table is the plain one. */
#ifndef LAB_RUNTIME_KPROF_H
#define LAB_RUNTIME_KPROF_H

#include <stdint.h>

/* X(enum suffix, name): lab_kp_category and lab_kprof_category_name's table come from this
 * list. attention: FlashAttention forward/backward, causal mask, softmax and its backward;
 * norm: layer norm, RMS norm; elementwise: elementwise ops, reductions, copies, memsets, random
 * numbers; loss: cross-entropy. */
#define LAB_KP_LIST(X)                                                                           \
  X(GEMM, "gemm") X(ATTENTION, "attention") X(NORM, "norm") X(ACTIVATION, "activation")         \
  X(ELEMENTWISE, "elementwise") X(EMBEDDING, "embedding") X(LOSS, "loss") X(OPTIMIZER, "optimizer")

#define LAB_KP_ENUM_(e, name) LAB_KP_##e,
typedef enum { LAB_KP_LIST(LAB_KP_ENUM_) LAB_KP_NCATS } lab_kp_category;
#undef LAB_KP_ENUM_

typedef struct {
  int64_t calls;
  double wall; /* seconds */
  double cpu;  /* seconds of process CPU time, all threads */
} lab_kp_total;

/* Turns the profiler on (the cpu table is swapped for a timing one) or off; either resets. */
void lab_kprof_enable(int on);
int lab_kprof_enabled(void);
void lab_kprof_reset(void);
/* The totals of category c since the last reset. */
lab_kp_total lab_kprof_total(lab_kp_category c);
const char *lab_kprof_category_name(lab_kp_category c);

#endif
