/* The global generator: a seed and a counter offset into the Philox stream. Every draw
 * advances the offset by the draws it used, so a sequence of calls is reproducible from
 * (seed, offset) alone, which is also what a checkpoint saves. */
#ifndef LAB_RUNTIME_RANDOM_H
#define LAB_RUNTIME_RANDOM_H

#include "tensor.h"

void lab_manual_seed(uint64_t seed);
void lab_rng_get_state(uint64_t *seed, uint64_t *offset);
void lab_rng_set_state(uint64_t seed, uint64_t offset);

/* lab.use_deterministic_algorithms (PyTorch's name): kernels whose results depend on the
 * order of atomic sums take a fixed-order path instead (the FlashAttention backward's dq) */
void lab_use_deterministic_algorithms(int on);
int lab_deterministic_algorithms(void);

int lab_rand_(lab_tensor *t, double lo, double hi);       /* uniform [lo, hi) */
int lab_randn_(lab_tensor *t, double mean, double std);   /* normal */
int lab_randint_(lab_tensor *t, int64_t lo, int64_t hi);  /* integers in [lo, hi) */

#endif
