/* The cpu device: host memory and the kernels of kernels/cpu, the reference every other
 * device is tested against. Strided launches walk their geometry with the row iterator
 * (runtime/cpu_rows.c), loading operands into compute-type blocks for the contiguous kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu/convert.h"
#include "../kernels/cpu/ewise.h"
#include "../kernels/cpu/flash_attention.h"
#include "../kernels/cpu/gemm.h"
#include "../kernels/cpu/nn.h"
#include "../kernels/cpu/philox.h"
#include "../kernels/cpu/reduce.h"
#include "block_cache.h"
#include "device.h"
#include "error.h"
#include "interrupt.h"
#include "cpu_rows.h"

/* ---- memory ---- */

static int cpu_count(void) { return 1; }

/* nbytes is a multiple of 64 (storage.c rounds): 64-byte aligned, so BLAS and vector loops get
 * whole cache lines */
static void *raw_alloc(size_t nbytes) { return aligned_alloc(64, nbytes); }
static void raw_free(void *p, size_t nbytes) {
  (void)nbytes;
  free(p);
}
/* freed blocks of 4 KiB and more kept for reuse, up to 1 GiB (smaller ones: malloc's own bins
 * do this well) */
static lab_block_cache cache = {.min = 4096, .limit = (size_t)1 << 30, .raw_alloc = raw_alloc, .raw_free = raw_free};

static void *cpu_alloc(int index, size_t nbytes) { return (void)index, lab_bc_alloc(&cache, nbytes); }
static void cpu_free(int index, void *p, size_t nbytes) { (void)index, lab_bc_free(&cache, p, nbytes); }
static size_t cpu_cached_bytes(int index) { return (void)index, cache.bytes; }
static void cpu_empty_cache(int index) { (void)index, lab_bc_empty(&cache); }
/* host memory: moving bytes in or out is a copy */
#define cpu_to_host cpu_copy
#define cpu_from_host cpu_copy
static int cpu_copy(int index, void *dst, const void *src, size_t n) {
  (void)index;
  if (n) memmove(dst, src, n);
  return 0;
}
static int cpu_memset(int index, void *dst, int byte, size_t n) {
  (void)index;
  if (n) memset(dst, byte, n);
  return 0;
}
static int cpu_synchronize(int index) {
  (void)index;
  return 0;
}

/* ---- elementwise: each row in blocks. Operands are loaded (converted and gathered) into
 * contiguous buffers of the compute type, the kernel runs, the result is stored back in the
 * output's type. Operands already in compute type with unit stride are used in place, so f32
 * and f64 contiguous ops copy nothing. ---- */

#define BLOCK 1024

static const void *operand(const lab_ew_args *c, int k, char *p, int64_t stride, int64_t n, void *buf) {
  size_t es = lab_dtype_size(c->ct);
  if ((c->scalars >> k) & 1u) { /* a value passed with the launch: its element, repeated */
    lab_load_row(c->dt[k], (const char *)c->sv[k].raw, 0, c->ct, buf, n);
    return buf;
  }
  if (c->dt[k] == c->ct && stride == (int64_t)es) return p;
  lab_load_row(c->dt[k], p, stride, c->ct, buf, n);
  return buf;
}

static void ew_row(void *vctx, char **ptrs, const int64_t *strides, int64_t n) {
  const lab_ew_args *c = vctx;
  _Alignas(64) char bufs[LAB_DEV_MAX_OPS][BLOCK * 8];
  size_t es = lab_dtype_size(c->ct);
  int nin = c->g.nops - 1;
  for (int64_t off = 0; off < n; off += BLOCK) {
    int64_t m = n - off < BLOCK ? n - off : BLOCK;
    const void *in[3] = {0};
    for (int k = 1; k <= nin; k++) in[k - 1] = operand(c, k, ptrs[k] + off * strides[k], strides[k], m, bufs[k]);
    int direct = c->dt[0] == c->ct && strides[0] == (int64_t)es;
    void *out = direct ? ptrs[0] + off * strides[0] : bufs[0];
    switch (c->kind) {
    case LAB_EW_BINARY: lab_binary_kernel((lab_binary_op)c->op, c->ct, in[0], in[1], out, m); break;
    case LAB_EW_UNARY: lab_unary_kernel((lab_unary_op)c->op, c->ct, in[0], out, m); break;
    case LAB_EW_CLAMP: lab_clamp_kernel(c->ct, in[0], out, m, c->lo, c->has_lo, c->hi, c->has_hi); break;
    case LAB_EW_WHERE: lab_where_kernel(c->ct, in[0], in[1], in[2], out, m); break;
    case LAB_EW_COPY:
      if (out != in[0]) memcpy(out, in[0], (size_t)m * es);
      break;
    }
    if (!direct) lab_store_row(c->ct, out, c->dt[0], ptrs[0] + off * strides[0], strides[0], m);
  }
}

static int cpu_ewise(const lab_ew_args *a) {
  lab_rows_run(&a->g, ew_row, (void *)a);
  return 0;
}

/* ---- reductions: each output element walks its line of the input, loaded into a
 * contiguous buffer in the compute type for the row kernels ---- */

static void reduce_line(const lab_red_args *c, const char *src, void *buf, char *out, char *idx_out) {
  lab_load_row(c->in_t, src, c->stride, c->ct, buf, c->len);
  if (c->op == LAB_R_MAX || c->op == LAB_R_MIN) {
    int64_t i = lab_row_argext(c->ct, buf, c->len, c->op == LAB_R_MAX);
    lab_store_row(c->ct, (char *)buf + i * (int64_t)lab_dtype_size(c->ct), c->out_t, out, 0, 1);
    *(int64_t *)idx_out = i;
    return;
  }
  if (c->ct == LAB_I64 && (c->op == LAB_R_SUM || c->op == LAB_R_PROD)) {
    int64_t v = c->op == LAB_R_SUM ? lab_row_sum_i(buf, c->len) : lab_row_prod_i(buf, c->len);
    lab_set_i64(c->out_t, out, v);
    return;
  }
  double v = 0;
  switch (c->op) {
  case LAB_R_SUM: v = lab_row_sum_f(c->ct, buf, c->len); break;
  case LAB_R_MEAN: v = c->len ? lab_row_sum_f(c->ct, buf, c->len) / (double)c->len : NAN; break;
  case LAB_R_PROD: v = lab_row_prod_f(c->ct, buf, c->len); break;
  case LAB_R_VAR: v = lab_row_var(c->ct, buf, c->len, c->param); break;
  case LAB_R_NORM: v = lab_row_norm(c->ct, buf, c->len, c->param); break;
  default: break;
  }
  lab_set_f64(c->out_t, out, v);
}

static void red_row(void *vctx, char **ptrs, const int64_t *strides, int64_t n) {
  const lab_red_args *c = vctx;
  void *buf = malloc((size_t)(c->len ? c->len : 1) * 8);
  if (!buf) return;
  int ext = c->op == LAB_R_MAX || c->op == LAB_R_MIN;
  for (int64_t i = 0; i < n; i++)
    reduce_line(c, ptrs[1] + i * strides[1], buf, ptrs[0] + i * strides[0], ext ? ptrs[2] + i * strides[2] : NULL);
  free(buf);
}

static int cpu_reduce(const lab_red_args *a) {
  lab_rows_run(&a->g, red_row, (void *)a);
  return 0;
}

/* ---- matrix products: one BLAS call per product of a batch (kernels/cpu/gemm.c) ---- */

static int cpu_gemm(const lab_gemm_args *a) {
  lab_gemm_batch(a->ct, a->trans_a, a->trans_b, a->m, a->n, a->k, a->alpha, a->a, a->a_off, a->lda, a->b, a->b_off,
                 a->ldb, a->beta, a->c, a->ldc, a->batches, lab_interrupt_requested);
  return 0;
}

/* ---- random numbers: the Philox stream ---- */

static int cpu_rand(const lab_rand_args *a) {
  switch (a->kind) {
  case LAB_RAND_UNIFORM:
    if (a->dt == LAB_F64) lab_rand_uniform_f64(a->seed, a->offset, a->out, a->n, a->a, a->b);
    else lab_rand_uniform_f32(a->seed, a->offset, a->out, a->n, (float)a->a, (float)a->b);
    break;
  case LAB_RAND_NORMAL:
    if (a->dt == LAB_F64) lab_rand_normal_f64(a->seed, a->offset, a->out, a->n, a->a, a->b);
    else lab_rand_normal_f32(a->seed, a->offset, a->out, a->n, (float)a->a, (float)a->b);
    break;
  case LAB_RAND_INT: lab_rand_int(a->seed, a->offset, a->out, a->n, a->lo, a->hi); break;
  }
  return 0;
}

/* ---- FlashAttention: kernels/cpu/flash_attention.c, f32 sums for f32, bf16 and f16 ---- */

static int cpu_flash_supports(lab_dtype dt, int64_t D, int64_t Dv) {
  (void)D, (void)Dv;
  return dt == LAB_F32 || dt == LAB_BF16 || dt == LAB_F16;
}
static int cpu_flash_fwd(const lab_flash_args *a) {
  if (lab_flash_attn_fwd(a) < 0) return lab_fail("sdpa", "flash forward: no memory for the tile buffers");
  return 0;
}
static int cpu_flash_bwd(const lab_flash_args *a) {
  if (lab_flash_attn_bwd(a) < 0) return lab_fail("sdpa", "flash backward: no memory for the tile buffers");
  return 0;
}

/* the fused kernels (kernels/fused_ops.h) as table entries: a void kernel cannot fail on the cpu
 * (status 0), an I64 one returns its value */
#define LAB_P(p) p
#define CALL_V_(call) \
  call;               \
  return 0;
#define CALL_I64_(call) return call;
#define CPU_WRAP_(name, R, cpu, cat, op, anchor, work, params, args) \
  static LAB_FUSED_STATUS(R) cpu_##name params { CALL_##R##_(cpu args) }
LAB_FUSED_ALL(CPU_WRAP_)
#undef CPU_WRAP_
#undef CALL_V_
#undef CALL_I64_
#undef LAB_P

static const lab_device_ops cpu_ops = {
    .name = "cpu",
    LAB_DEVICE_MEMORY(cpu) /* device.h */
    LAB_DEVICE_LAUNCHES(cpu)
#define CPU_ENTRY_(name, R, cpu, cat, op, anchor, work, params, args) .name = cpu_##name,
    LAB_FUSED_ALL(CPU_ENTRY_) /* kernels/fused_ops.h: every fused kernel, the optional ones too */
#undef CPU_ENTRY_
    .flash_supports = cpu_flash_supports,
    .flash_fwd = cpu_flash_fwd,
    .flash_bwd = cpu_flash_bwd,
    .flash_strided = 1,
};

const lab_device_ops *lab_cpu_device_ops(void) { return &cpu_ops; }

/* registered when the program is loaded (device.h): every process has a cpu */
__attribute__((constructor)) static void cpu_register(void) { lab_device_register(LAB_DEV_CPU, &cpu_ops); }
