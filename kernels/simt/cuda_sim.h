// The CUDA C that kernels/cuda uses, for the host compiler (C++17, LAB_SIMT defined): what
// common.cuh includes in place of the toolkit's device compilation. Types and host conversions
// come from the toolkit's own headers (cuda_runtime.h, cuda_bf16.h, cuda_fp16.h, cuda_fp8.h);
// everything a thread does that a CPU thread cannot do by itself goes to the interpreter
// (simt.h): threadIdx and friends read the running fiber, __syncthreads and the warp
// intrinsics block it, static __shared__ variables are thread_local (one copy per worker, that
// is per running block), dynamic shared memory is the worker's block buffer, and a launch is
// lab_launch<kernel>(grid, block, smem, stream, args...), which both builds spell the same way.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <utility>
#include <type_traits>

#include "simt.h"

#undef __shared__
#define __shared__ static thread_local
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

#define threadIdx (lab_simt_self->tidx)
#define blockIdx (lab_simt_self->blk->bidx)
#define blockDim (lab_simt_self->blk->bdim)
#define gridDim (lab_simt_self->blk->gdim)

// the dynamic shared memory of the block: `extern __shared__ T name[]` on the GPU
#define LAB_DYN_SMEM(T, name) T *name = static_cast<T *>(lab_simt_self->blk->dyn_smem)

static inline void __syncthreads() { lab_simt_syncthreads(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { lab_simt_syncwarp(mask); }

template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lanemask, int width = 32) {
  static_assert(sizeof(T) <= 8, "shfl of at most 8 bytes");
  (void)width; // the kernels shuffle whole warps
  T out;
  lab_simt_shfl_xor(mask, &v, &out, sizeof v, lanemask);
  return out;
}

static inline float atomicAdd(float *p, float v) { return lab_simt_atomic_add_f32(p, v); }
static inline double atomicAdd(double *p, double v) { return lab_simt_atomic_add_f64(p, v); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
  return lab_simt_atomic_add_u64(p, v);
}
static inline int atomicAdd(int *p, int v) { return lab_simt_atomic_add_i32(p, v); }

static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }

// The few runtime calls the launchers make, answered by the interpreter: renamed so that no
// symbol of the real libcudart is defined here (both live in one process).
namespace lab_simt_rt {
inline thread_local int last_error = 0;
static inline cudaError_t get_last_error() {
  cudaError_t e = (cudaError_t)last_error;
  last_error = 0;
  return e;
}
template <typename F>
static inline cudaError_t func_set_attribute(F *, cudaFuncAttribute, int v) {
  return v >= 0 && v <= (227 << 10) ? cudaSuccess : cudaErrorInvalidValue;
}
extern "C" int lab_simt_memset_async(void *p, int byte, size_t n); // through memcheck
// on a stream with a queue set (simt.h): stream work, in order with the launches around it
struct memset_work : lab_simt_work {
  void *p;
  int byte;
  size_t n;
  static int run_(lab_simt_work *w) {
    memset_work *m = static_cast<memset_work *>(w);
    return lab_simt_memset_async(m->p, m->byte, m->n);
  }
  static void drop_(lab_simt_work *w) { delete static_cast<memset_work *>(w); }
};
static inline cudaError_t memset_async(void *p, int byte, size_t n, cudaStream_t s) {
  lab_simt_queue_fn q = lab_simt_queue();
  if (!q || !s) return (cudaError_t)lab_simt_memset_async(p, byte, n);
  memset_work *m = new memset_work;
  m->run = memset_work::run_, m->drop = memset_work::drop_, m->kernel = "cudaMemsetAsync";
  m->p = p, m->byte = byte, m->n = n;
  return (cudaError_t)q(s, m);
}

// "flash_fwd_k<__nv_bfloat16, 64>" from the signature of name_of<kernel>()
template <auto K>
const char *name_of() {
  static char buf[160];
  if (!buf[0]) {
    const char *s = __PRETTY_FUNCTION__, *b = strstr(s, "K = ");
    b = b ? b + 4 : s;
    if (const char *ns = strstr(b, "lab_simt_k::")) b = ns + 12;
    size_t n = strcspn(b, ";]");
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, b, n);
  }
  return buf;
}

template <auto K>
struct registered {
  static inline const int id = lab_simt_register_kernel(name_of<K>());
};

template <auto K, typename... P>
struct pack {
  std::tuple<std::decay_t<P>...> args;
  // the copy of the arguments onto the thread's stack is the launch's, not the kernel's: not
  // instrumented (a lab_ew_args by value was 75 hook calls per thread)
  template <size_t... I>
  __attribute__((no_sanitize_thread)) static void call(pack *p, std::index_sequence<I...>) {
    K(std::get<I>(p->args)...);
  }
  __attribute__((no_sanitize_thread)) static void entry(void *p) {
    call(static_cast<pack *>(p), std::index_sequence_for<P...>());
  }
};

// a launch as stream work: the descriptor and the arguments, captured by value at the launch
template <auto K, typename... P>
struct launch_work : lab_simt_work {
  pack<K, P...> pk;
  lab_simt_launch_desc d;
  static int run_(lab_simt_work *w) {
    launch_work *l = static_cast<launch_work *>(w);
    l->d.args = &l->pk;
    return lab_simt_launch(&l->d);
  }
  static void drop_(lab_simt_work *w) { delete static_cast<launch_work *>(w); }
};

// Runs the launch now (no queue, or no stream), or hands it to the stream's queue: a
// configuration a GPU refuses fails here, at the launch, as cudaGetLastError reports it there;
// what the kernel does fails when the stream runs it (runtime/simrt keeps that sticky).
template <auto K, typename... P, typename... A>
static int run(void (*)(P...), dim3 g, dim3 b, size_t smem, cudaStream_t s, A &&...a) {
  lab_simt_launch_desc d = {name_of<K>(), registered<K>::id, {g.x, g.y, g.z}, {b.x, b.y, b.z}, smem,
                            &pack<K, P...>::entry, nullptr};
  lab_simt_queue_fn q = lab_simt_queue();
  if (!q || !s) {
    pack<K, P...> pk{std::tuple<std::decay_t<P>...>(static_cast<std::decay_t<P>>(a)...)};
    d.args = &pk;
    return lab_simt_launch(&d);
  }
  if (int e = lab_simt_check_config(&d)) return e;
  launch_work<K, P...> *l = new launch_work<K, P...>{
      {launch_work<K, P...>::run_, launch_work<K, P...>::drop_, d.kernel},
      {std::tuple<std::decay_t<P>...>(static_cast<std::decay_t<P>>(a)...)},
      d};
  return q(s, l);
}
}  // namespace lab_simt_rt

template <auto K, typename... A>
static inline void lab_launch(dim3 g, dim3 b, size_t smem, cudaStream_t s, A &&...a) {
  int e = lab_simt_rt::run<K>(K, g, b, smem, s, static_cast<A &&>(a)...);
  if (e) lab_simt_rt::last_error = e;
}

#define cudaGetLastError lab_simt_rt::get_last_error
#define cudaFuncSetAttribute lab_simt_rt::func_set_attribute
#define cudaMemsetAsync lab_simt_rt::memset_async
