/* Philox4x32-10, the counter-based generator cuRAND and PyTorch's CUDA path use. Element i
 * of a draw depends only on (seed, offset + i), so results do not depend on thread count. */
#ifndef LAB_KERNELS_PHILOX_H
#define LAB_KERNELS_PHILOX_H

#include <stdint.h>

/* Four 32-bit outputs for a 128-bit counter (ctr) and 64-bit key. */
void lab_philox4x32(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]);

/* Fill n values starting at counter position `offset` (in units of single draws). */
void lab_rand_uniform_f32(uint64_t seed, uint64_t offset, float *out, int64_t n, float lo,
                          float hi);
void lab_rand_uniform_f64(uint64_t seed, uint64_t offset, double *out, int64_t n, double lo,
                          double hi);
void lab_rand_normal_f64(uint64_t seed, uint64_t offset, double *out, int64_t n, double mean,
                         double std);
void lab_rand_normal_f32(uint64_t seed, uint64_t offset, float *out, int64_t n, float mean,
                         float std);
void lab_rand_int(uint64_t seed, uint64_t offset, int64_t *out, int64_t n, int64_t lo,
                  int64_t hi);

#endif
