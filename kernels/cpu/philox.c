/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
 * Each draw i uses counter word (offset + i) / 4 and lane (offset + i) % 4: the stream is
 * a pure function of its position, which is what makes parallel filling reproducible. */
#include "philox.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

void lab_philox4x32(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32);
  uint32_t c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(PHILOX_M0, c0, &hi0);
    uint32_t lo1 = mulhilo(PHILOX_M1, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static inline uint32_t draw32(uint64_t seed, uint64_t pos) {
  uint32_t o[4];
  lab_philox4x32(seed, 0, pos >> 2, o);
  return o[pos & 3];
}

/* Blocks of four draws share one Philox call; the edges fall back to single draws. */
#define FILL(T, EXPR)                                                                          \
  _Pragma("omp parallel for schedule(static)")                                                 \
  for (int64_t i = 0; i < n; i++) {                                                            \
    uint32_t u = draw32(seed, offset + (uint64_t)i);                                           \
    out[i] = (T)(EXPR);                                                                        \
  }

/* 24 random bits give every float in [0,1) on a uniform grid, as torch.rand does. */
void lab_rand_uniform_f32(uint64_t seed, uint64_t offset, float *out, int64_t n, float lo,
                          float hi) {
  FILL(float, lo + (hi - lo) * ((u >> 8) * (1.0f / 16777216.0f)))
}

void lab_rand_uniform_f64(uint64_t seed, uint64_t offset, double *out, int64_t n, double lo,
                          double hi) {
  _Pragma("omp parallel for schedule(static)")
  for (int64_t i = 0; i < n; i++) {
    uint64_t a = draw32(seed, offset + 2 * (uint64_t)i), b = draw32(seed, offset + 2 * (uint64_t)i + 1);
    uint64_t bits = ((a << 32) | b) >> 11; /* 53 bits */
    out[i] = lo + (hi - lo) * (bits * (1.0 / 9007199254740992.0));
  }
}

/* Box-Muller on draw pairs (2i, 2i+1): value i never depends on how the work is split. */
void lab_rand_normal_f64(uint64_t seed, uint64_t offset, double *out, int64_t n, double mean,
                         double std) {
  _Pragma("omp parallel for schedule(static)")
  for (int64_t i = 0; i < n; i++) {
    uint32_t a = draw32(seed, offset + 2 * (uint64_t)i), b = draw32(seed, offset + 2 * (uint64_t)i + 1);
    double u1 = ((a >> 8) + 1.0) * (1.0 / 16777216.0); /* (0, 1]: log is finite */
    double u2 = (b >> 8) * (1.0 / 16777216.0);
    out[i] = mean + std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  }
}

void lab_rand_normal_f32(uint64_t seed, uint64_t offset, float *out, int64_t n, float mean,
                         float std) {
  _Pragma("omp parallel for schedule(static)")
  for (int64_t i = 0; i < n; i++) {
    uint32_t a = draw32(seed, offset + 2 * (uint64_t)i), b = draw32(seed, offset + 2 * (uint64_t)i + 1);
    float u1 = ((a >> 8) + 1.0f) * (1.0f / 16777216.0f);
    float u2 = (b >> 8) * (1.0f / 16777216.0f);
    out[i] = mean + std * sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
  }
}

void lab_rand_int(uint64_t seed, uint64_t offset, int64_t *out, int64_t n, int64_t lo,
                  int64_t hi) {
  /* in unsigned arithmetic: hi - lo overflows int64 for ranges wider than 2^63 (found by
   * tests/fuzz: randint(-1, math.maxinteger)) */
  uint64_t range = (uint64_t)hi - (uint64_t)lo;
  _Pragma("omp parallel for schedule(static)")
  for (int64_t i = 0; i < n; i++) {
    uint64_t a = draw32(seed, offset + 2 * (uint64_t)i), b = draw32(seed, offset + 2 * (uint64_t)i + 1);
    out[i] = (int64_t)((uint64_t)lo + ((a << 32) | b) % range);
  }
}
