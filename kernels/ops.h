/* The operations every device implements, named once for all of them: elementwise ops,
 * reductions and activations, and the descriptions of a launch (strided geometry, products,
 * random draws). Device-neutral, so the runtime, the CPU kernels and the CUDA launchers all
 * speak the same enums and structs. */
#ifndef LAB_KERNELS_OPS_H
#define LAB_KERNELS_OPS_H

#include <stdint.h>

#include "dtype.h"

/* X(enum suffix, name): the enums below and the names (runtime/ewise.c's lab_binary_name and
 * lab_unary_name, runtime/reduce.c's lab_reduce_name) come from these lists.
 * FLOOR_DIV is Lua's and Python's //: floor(a / b), integers stay integers. */
#define LAB_BINARY_LIST(X)                                                                       \
  X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(POW, "pow") X(MAXIMUM, "maximum")   \
  X(MINIMUM, "minimum") X(REMAINDER, "remainder") X(EQ, "eq") X(NE, "ne") X(LT, "lt")          \
  X(LE, "le") X(GT, "gt") X(GE, "ge") X(FLOOR_DIV, "floor_divide")

#define LAB_UNARY_LIST(X)                                                                        \
  X(NEG, "neg") X(ABS, "abs") X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt") X(RSQRT, "rsqrt")     \
  X(TANH, "tanh") X(SIGMOID, "sigmoid")

/* var: with a correction; norm: the p-norm; max/min: their values (indices: lab_reduce_ext) */
#define LAB_REDUCE_LIST(X)                                                                       \
  X(R_SUM, "sum") X(R_MEAN, "mean") X(R_PROD, "prod") X(R_VAR, "var") X(R_NORM, "norm")         \
  X(R_MAX, "max") X(R_MIN, "min")

#define LAB_OP_ENUM_(e, name) LAB_##e,
typedef enum { LAB_BINARY_LIST(LAB_OP_ENUM_) LAB_NBINARY } lab_binary_op;
typedef enum { LAB_UNARY_LIST(LAB_OP_ENUM_) LAB_NUNARY } lab_unary_op;
typedef enum { LAB_REDUCE_LIST(LAB_OP_ENUM_) LAB_NREDUCE } lab_reduce_op;
#undef LAB_OP_ENUM_

/* What an elementwise launch does with its operands (operand 0 is the output). */
typedef enum {
  LAB_EW_BINARY, /* out = a op b */
  LAB_EW_UNARY,  /* out = op a */
  LAB_EW_CLAMP,  /* out = clamp(a, lo, hi) */
  LAB_EW_WHERE,  /* out = c ? a : b */
  LAB_EW_COPY    /* out = a, converting the element type */
} lab_ew_kind;

typedef enum {
  LAB_ACT_GELU,      /* exact, with erf */
  LAB_ACT_GELU_TANH, /* the tanh approximation */
  LAB_ACT_SILU
} lab_act_kind;

#define LAB_DEV_MAX_DIMS 8 /* = LAB_MAX_DIMS */
#define LAB_DEV_MAX_OPS 4  /* operands of one elementwise launch, output included */

/* Strided geometry of one launch: operands walked together over `shape` (dims already
 * broadcast and merged), strides in bytes, 0 for a broadcast dim. */
typedef struct {
  int ndim;
  int64_t shape[LAB_DEV_MAX_DIMS];
  int nops;
  char *data[LAB_DEV_MAX_OPS];
  int64_t stride[LAB_DEV_MAX_OPS][LAB_DEV_MAX_DIMS];
} lab_geometry;

/* An operand passed by value (lab_ew_args.scalars): its one element, of the operand's dtype, as
 * a double (f: floating dtypes) or an int64 (i: integers and bool, is_int), which a kernel
 * converts to its compute type as it would convert the element loaded from memory, and the
 * element's own bytes (raw) for the cpu kernels' row loader. */
typedef struct {
  double f;
  int64_t i;
  int is_int;
  union { /* raw is read in place as its dtype (a double, an int64): 8-byte aligned */
    unsigned char raw[8];
    int64_t raw_align;
  };
} lab_ew_scalar;

/* Elementwise launch: operand 0 is the output; values are computed in ct and stored in each
 * operand's own type. */
typedef struct {
  lab_geometry g;
  lab_ew_kind kind;
  int op; /* lab_binary_op or lab_unary_op */
  lab_dtype ct;
  lab_dtype dt[LAB_DEV_MAX_OPS];
  double lo, hi; /* clamp bounds */
  int has_lo, has_hi;
  /* bit k: input operand k is the value sv[k], not memory (g.data[k] NULL, strides 0): a Lua
   * number or a cpu 0-d tensor in an op on a device goes to the kernel as an argument instead of
   * a host-to-device copy before every op (runtime/ewise.c) */
  unsigned scalars;
  lab_ew_scalar sv[LAB_DEV_MAX_OPS];
} lab_ew_args;

/* Reduction launch: the geometry walks the output (operand 0), the first element of each
 * input line (operand 1) and, for max/min, the index output (operand 2); each line has `len`
 * elements `stride` bytes apart. */
typedef struct {
  lab_geometry g;
  lab_reduce_op op;
  lab_dtype in_t, ct, out_t;
  int64_t len, stride;
  double param; /* var: correction; norm: p */
  /* device scratch of lab_cu_reduce_work_bytes (kernels/cuda/launch.h) for the multi-block
   * reduction of a few long lines; NULL: one block per output */
  void *work;
} lab_red_args;

/* A batch of row-major products C_b = alpha op(A_b) op(B_b) + beta C_b; element offsets per
 * batch are host arrays; C is contiguous (batch b at b * m * ldc). */
typedef struct {
  lab_dtype ct;
  int trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc;
  double alpha, beta;
  const void *a, *b;
  void *c;
  int64_t batches;
  const int64_t *a_off, *b_off;
} lab_gemm_args;

typedef enum { LAB_RAND_UNIFORM, LAB_RAND_NORMAL, LAB_RAND_INT } lab_rand_kind;

/* n draws from the Philox stream at (seed, offset) into a contiguous f32, f64 or i64 array. */
typedef struct {
  lab_rand_kind kind;
  lab_dtype dt;
  uint64_t seed, offset;
  void *out;
  int64_t n;
  double a, b;     /* uniform [a, b); normal mean a, std b */
  int64_t lo, hi;  /* integers in [lo, hi) */
} lab_rand_args;

/* FlashAttention over BH = batch x heads independent problems, all contiguous row-major:
 * q [BH, T, D], k [BH, S, D], v [BH, S, Dv], o and dout [BH, T, Dv] of dtype dt; lse [BH, T]
 * f32 (the log-sum-exp of each query's scaled scores, saved by the forward for the backward).
 * causal: query t sees keys s <= t + (S - T) (aligned at the bottom right, as the math path's
 * mask); a query that sees no key gets o = 0 and lse = -inf. The backward writes dq, dk, dv
 * (dtype dt) and uses `work` (lab_flash_work_bytes of device memory) for the f32 dq sums and
 * the row dots of dout and o. */
/* Where a problem's rows lie in a tensor that is not contiguous [BH, rows, width]: row r of
 * problem bh = b H + h starts at element b sb + h sh + r st (its width elements adjacent).
 * st = 0: contiguous. Lets q, k, v be head views of one [B, T, 3C] projection and o, dout,
 * dq, dk, dv be [B, T, H, D] in memory, as the head split and merge leave them, instead of
 * copies; only devices whose table sets flash_strided are given anything but contiguous. */
typedef struct {
  int64_t sb, sh, st;
} lab_flash_layout;

typedef struct {
  lab_dtype dt;
  int64_t BH, T, S, D, Dv;
  double scale;
  int causal;
  const void *q, *k, *v, *o, *dout;
  void *out, *lse; /* forward results: out [BH, T, Dv], lse */
  void *dq, *dk, *dv, *work;
  /* layouts (see lab_flash_layout; all zero: every tensor contiguous) with H heads per batch
   * entry (0 counts as 1); `lo` serves out (forward) and o (backward) */
  int64_t H;
  lab_flash_layout lq, lk, lv, lo, ldo, ldq, ldk, ldv;
  /* 1: the backward's results are the same bits on every run (lab.use_deterministic_algorithms;
   * the cuda kernels then sum dq in a fixed order instead of by atomics) */
  int deterministic;
} lab_flash_args;

static inline size_t lab_flash_work_bytes(int64_t BH, int64_t T, int64_t D) {
  return (size_t)(BH * T * (D + 1)) * sizeof(float);
}

#endif
