/* The operations every device implements, named once for all of them: elementwise ops,
 * reductions and activations. Device-neutral (no pointers, no layouts), so the runtime,
 * the CPU kernels and the CUDA launchers all speak the same enums. */
#ifndef LAB_KERNELS_OPS_H
#define LAB_KERNELS_OPS_H

typedef enum {
  LAB_ADD, LAB_SUB, LAB_MUL, LAB_DIV, LAB_POW, LAB_MAXIMUM, LAB_MINIMUM, LAB_REMAINDER,
  LAB_EQ, LAB_NE, LAB_LT, LAB_LE, LAB_GT, LAB_GE,
  LAB_NBINARY
} lab_binary_op;

typedef enum {
  LAB_NEG, LAB_ABS, LAB_EXP, LAB_LOG, LAB_SQRT, LAB_RSQRT, LAB_TANH, LAB_SIGMOID,
  LAB_NUNARY
} lab_unary_op;

/* What an elementwise launch does with its operands (operand 0 is the output). */
typedef enum {
  LAB_EW_BINARY, /* out = a op b */
  LAB_EW_UNARY,  /* out = op a */
  LAB_EW_CLAMP,  /* out = clamp(a, lo, hi) */
  LAB_EW_WHERE,  /* out = c ? a : b */
  LAB_EW_COPY    /* out = a, converting the element type */
} lab_ew_kind;

typedef enum { LAB_R_SUM, LAB_R_MEAN, LAB_R_PROD, LAB_R_VAR, LAB_R_NORM, LAB_R_MAX, LAB_R_MIN } lab_reduce_op;

typedef enum {
  LAB_ACT_GELU,      /* exact, with erf */
  LAB_ACT_GELU_TANH, /* the tanh approximation */
  LAB_ACT_SILU
} lab_act_kind;

#endif
