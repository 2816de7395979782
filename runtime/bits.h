/* A tensor's elements as bits: flipping one bit (fault injection), and finding NaN and Inf
 * without converting (anomaly mode). The checksum that any flipped bit changes, which replica
 * and gradient checks compare across ranks, is checksum.h's (t:checksum()). All read and write through host copies
 * (transfer.h), so they work on every device; they are for checks and faults, not hot loops. */
#ifndef LAB_RUNTIME_BITS_H
#define LAB_RUNTIME_BITS_H

#include <stdint.h>

#include "tensor.h"

/* Flips bit `bit` (0 = least significant of the element's bytes) of element `index`
 * (0-based, row-major). */
int lab_bits_flip(lab_tensor *t, int64_t index, int bit);
/* Counts t's NaN and Inf elements (float dtypes; 0 for others). */
int lab_bits_nonfinite(lab_tensor *t, int64_t *nan, int64_t *inf);
/* One pass over a floating-point tensor: the largest |x| and the sum of squares (in double) of
 * its finite elements, and how many are NaN and Inf (the monitor's activation statistics;
 * FP8 tensors give the counts only). */
typedef struct {
  double max_abs, sum_sq;
  int64_t nan, inf;
} lab_bits_stats;
int lab_bits_summary(lab_tensor *t, lab_bits_stats *out);
/* Writes NaN into element `index` of a floating-point tensor. */
int lab_bits_poison(lab_tensor *t, int64_t index);

#endif
