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

#define LAB_KP_NAME_(e, name) name,
static const char *names[LAB_KP_NCATS] = {LAB_KP_LIST(LAB_KP_NAME_)};
#undef LAB_KP_NAME_

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

/* One wrapper per kernel entry: time the plain kernel and book it under its category. R is
 * the kind of result: V (a fused kernel's entry: an int status), INT or I64. */
#define TIME_V_(call, cat) TIME_INT_(call, cat)
#define TIME_INT_(call, cat) \
  stamp t_ = now();          \
  int r_ = call;             \
  add(LAB_KP_##cat, t_);     \
  return r_;
#define TIME_I64_(call, cat) \
  stamp t_ = now();          \
  int64_t r_ = call;         \
  add(LAB_KP_##cat, t_);     \
  return r_;
#define LAB_FUSED_STATUS_INT int
#define LAB_P(p) p
#define WRAP_(name, R, cpu, cat, op, anchor, work, params, args) \
  static LAB_FUSED_STATUS(R) t_##name params { TIME_##R##_(plain->name args, cat) }
/* the entries that are not fused kernels, in the columns of kernels/fused_ops.h */
#define OTHER_ENTRIES_(X)                                                                                    \
  X(copy, INT, -, ELEMENTWISE, -, -, 0, (int index, void *dst, const void *src, size_t n), (index, dst, src, n)) \
  X(memset, INT, -, ELEMENTWISE, -, -, 0, (int index, void *dst, int byte, size_t n), (index, dst, byte, n))     \
  X(ewise, INT, -, ELEMENTWISE, -, -, 0, (const lab_ew_args *a), (a))                                            \
  X(reduce, INT, -, ELEMENTWISE, -, -, 0, (const lab_red_args *a), (a))                                          \
  X(gemm, INT, -, GEMM, -, -, 0, (const lab_gemm_args *a), (a))                                                  \
  X(rand, INT, -, ELEMENTWISE, -, -, 0, (const lab_rand_args *a), (a))                                           \
  X(flash_fwd, INT, -, ATTENTION, -, -, 0, (const lab_flash_args *a), (a))                                       \
  X(flash_bwd, INT, -, ATTENTION, -, -, 0, (const lab_flash_args *a), (a))
OTHER_ENTRIES_(WRAP_)
LAB_FUSED_ALL(WRAP_) /* kernels/fused_ops.h */
#undef WRAP_
#undef LAB_P

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
#define SET_(name, R, cpu, cat, op, anchor, work, params, args) \
  if (plain->name) timed.name = t_##name;
  OTHER_ENTRIES_(SET_)
  LAB_FUSED_ALL(SET_)
#undef SET_
  timed.to_host = t_copy; /* host <-> host copies are copies */
  timed.from_host = t_copy;
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
