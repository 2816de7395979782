/* GEMM dispatch and the thread setting that BLAS and our OpenMP loops share. */
#include "gemm.h"

#include <cblas.h>
#include <omp.h>
#include <string.h>
#include <strings.h>

static int num_threads = 1;

void lab_cpu_set_threads(int n) {
  if (n < 1) n = 1;
  num_threads = n;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int lab_cpu_threads(void) { return num_threads; }

const char *lab_cpu_blas_corename(void) { return openblas_get_corename(); }

const char *lab_cpu_blas_better_coretype(void) {
  const char *core = openblas_get_corename();
  int weak = strcasecmp(core, "prescott") == 0 || strcasecmp(core, "core2") == 0 ||
             strcasecmp(core, "nehalem") == 0 || strcasecmp(core, "sandybridge") == 0 ||
             strcasecmp(core, "generic") == 0 || strcasecmp(core, "katmai") == 0;
  int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512 && (weak || strcasecmp(core, "haswell") == 0)) return "SkylakeX";
  if (avx2 && weak) return "Haswell";
  return NULL;
}

void lab_gemm(lab_dtype ct, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
              void *c, int64_t ldc) {
  enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if (ct == LAB_F32) {
    cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b,
                (int)ldb, (float)beta, c, (int)ldc);
  } else if (ct == LAB_F64) {
    cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb,
                beta, c, (int)ldc);
  } else {
    const int64_t *A = a, *B = b;
    int64_t *C = c;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        /* integer products wrap as PyTorch's do (two's complement): unsigned arithmetic,
         * since signed overflow is undefined in C (UBSan caught it in the API fuzzer) */
        uint64_t s = 0;
        for (int64_t p = 0; p < k; p++) {
          int64_t av = trans_a ? A[p * lda + i] : A[i * lda + p];
          int64_t bv = trans_b ? B[j * ldb + p] : B[p * ldb + j];
          s += (uint64_t)av * (uint64_t)bv;
        }
        uint64_t scaled = alpha == 1 ? s : (uint64_t)(int64_t)(alpha * (double)(int64_t)s);
        uint64_t prior = beta != 0 ? (uint64_t)(int64_t)beta * (uint64_t)C[i * ldc + j] : 0;
        C[i * ldc + j] = (int64_t)(scaled + prior);
      }
  }
}

/* one product of a batch; k == 0 leaves beta C, as BLAS does with alpha = 0 */
static void one_of_batch(lab_dtype ct, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                         const char *a, int64_t lda, const char *b, int64_t ldb, double beta, char *c,
                         int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    memset(c, 0, (size_t)(m * ldc) * lab_dtype_size(ct));
    return;
  }
  lab_gemm(ct, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void lab_gemm_batch(lab_dtype ct, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                    double alpha, const void *a, const int64_t *a_off, int64_t lda, const void *b,
                    const int64_t *b_off, int64_t ldb, double beta, void *c, int64_t ldc,
                    int64_t batches, int (*stop)(void)) {
  size_t es = lab_dtype_size(ct);
  const char *A = a, *B = b;
  char *C = c;
  int threads = num_threads;
  /* side by side when the batch fills the threads evenly, or is long, or each product is
   * small (<= 2M multiply-adds: 128 x 128 x 128); OpenBLAS runs one thread inside a region */
  int side = threads > 1 && batches >= threads &&
             (batches % threads == 0 || batches >= 4 * threads || m * n * k <= (1 << 21));
  if (!side) {
    for (int64_t bi = 0; bi < batches; bi++) {
      if (stop && stop()) break;
      one_of_batch(ct, trans_a, trans_b, m, n, k, alpha, A + a_off[bi] * (int64_t)es, lda, B + b_off[bi] * (int64_t)es,
                   ldb, beta, C + bi * m * ldc * (int64_t)es, ldc);
    }
    return;
  }
  int stopped = 0;
#pragma omp parallel for schedule(static)
  for (int64_t bi = 0; bi < batches; bi++) {
    int quit;
#pragma omp atomic read
    quit = stopped;
    if (quit) continue;
    if (stop && omp_get_thread_num() == 0 && stop()) {
#pragma omp atomic write
      stopped = 1;
    }
    one_of_batch(ct, trans_a, trans_b, m, n, k, alpha, A + a_off[bi] * (int64_t)es, lda, B + b_off[bi] * (int64_t)es,
                 ldb, beta, C + bi * m * ldc * (int64_t)es, ldc);
  }
}
