/* Random fills. Values are drawn in the compute type into a contiguous scratch tensor and
 * copied into the target, so views and every dtype are filled the same way. */
#include "random.h"

#include "error.h"
#include "transfer.h"

static uint64_t rng_seed = 0x853c49e6748fea9bull, rng_offset = 0;

void lab_manual_seed(uint64_t seed) {
  rng_seed = seed;
  rng_offset = 0;
}

static int deterministic;
void lab_use_deterministic_algorithms(int on) { deterministic = on != 0; }
int lab_deterministic_algorithms(void) { return deterministic; }

void lab_rng_get_state(uint64_t *seed, uint64_t *offset) {
  *seed = rng_seed;
  *offset = rng_offset;
}

void lab_rng_set_state(uint64_t seed, uint64_t offset) {
  rng_seed = seed;
  rng_offset = offset;
}

/* Reserves n draws' positions; rounded up to a whole Philox block so the next call starts
 * on a fresh counter. */
static uint64_t take(int64_t n) {
  uint64_t at = rng_offset;
  rng_offset += ((uint64_t)n + 3) & ~(uint64_t)3;
  return at;
}

static int fill(lab_tensor *t, lab_dtype scratch_t, lab_tensor **scratch) {
  *scratch = lab_tensor_empty_on(lab_device_of(t), scratch_t, t->ndim, t->shape);
  return *scratch ? 0 : -1;
}

static int finish(lab_tensor *t, lab_tensor *scratch) {
  int rc = scratch == t ? 0 : lab_copy_(t, scratch);
  if (scratch != t) lab_tensor_release(scratch);
  return rc;
}

static lab_tensor *scratch_for(lab_tensor *t, lab_dtype st) {
  if (t->dtype == st && lab_is_contiguous(t)) return t;
  lab_tensor *s;
  return fill(t, st, &s) < 0 ? NULL : s;
}

/* fills t with a's draws through a scratch of dtype st (t itself when it already is that
 * and contiguous), taking per counter values of the stream for each element */
static int generate(lab_tensor *t, lab_dtype st, lab_rand_args a, int64_t per) {
  lab_tensor *s = scratch_for(t, st);
  if (!s) return -1;
  a.dt = st;
  a.seed = rng_seed;
  a.n = lab_numel(t);
  a.offset = take(per * a.n);
  a.out = lab_data(s);
  if (lab_ops_of(s)->rand(&a) < 0) { /* "rand: cuda:0: kernel launch failed ..." */
    if (s != t) lab_tensor_release(s);
    return -1;
  }
  return finish(t, s);
}

int lab_rand_(lab_tensor *t, double lo, double hi) {
  if (!lab_dtype_is_float(t->dtype)) return lab_fail("rand", "needs a floating-point tensor, got %s", lab_dtype_name(t->dtype));
  lab_dtype st = t->dtype == LAB_F64 ? LAB_F64 : LAB_F32;
  return generate(t, st, (lab_rand_args){.kind = LAB_RAND_UNIFORM, .a = lo, .b = hi}, st == LAB_F64 ? 2 : 1);
}

int lab_randn_(lab_tensor *t, double mean, double std) {
  if (!lab_dtype_is_float(t->dtype)) return lab_fail("randn", "needs a floating-point tensor, got %s", lab_dtype_name(t->dtype));
  lab_dtype st = t->dtype == LAB_F64 ? LAB_F64 : LAB_F32;
  return generate(t, st, (lab_rand_args){.kind = LAB_RAND_NORMAL, .a = mean, .b = std}, 2);
}

int lab_randint_(lab_tensor *t, int64_t lo, int64_t hi) {
  if (hi <= lo) return lab_fail("randint", "empty range [%lld, %lld)", (long long)lo, (long long)hi);
  return generate(t, LAB_I64, (lab_rand_args){.kind = LAB_RAND_INT, .lo = lo, .hi = hi}, 2);
}
