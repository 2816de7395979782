/* The device seam: where a tensor's memory lives (cpu, sim, cuda) and the table of functions
 * that allocate, move and compute on that memory. Every device fills the same table, as every
 * communicator backend fills lab_comm_backend; the runtime picks the table from the tensor's
 * device at run time and never touches device memory itself. The CPU table calls the kernels
 * of kernels/cpu, the reference every other device is tested against. */
#ifndef LAB_RUNTIME_DEVICE_H
#define LAB_RUNTIME_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/dtype.h"
#include "../kernels/fused_ops.h" /* the fused kernels' signatures */
#include "../kernels/ops.h" /* the enums and the launch descriptions every device takes */

/* X(enum suffix, name): the device types and the names "cpu:0" parses and errors print
 * (device.c's table) come from this one list; a new device adds its line here and registers
 * its table from its own file (lab_device_register, lab_device_provide below). */
#define LAB_DEVICE_LIST(X) X(CPU, "cpu") X(SIM, "sim") X(CUDA, "cuda")

#define LAB_DEV_ENUM_(e, name) LAB_DEV_##e,
typedef enum { LAB_DEVICE_LIST(LAB_DEV_ENUM_) LAB_NDEVTYPES } lab_device_type;
#undef LAB_DEV_ENUM_

typedef struct {
  lab_device_type type;
  int index;
} lab_device;

static inline lab_device lab_cpu(void) { return (lab_device){LAB_DEV_CPU, 0}; }
static inline int lab_device_eq(lab_device a, lab_device b) { return a.type == b.type && a.index == b.index; }

typedef struct lab_device_ops {
  const char *name;
  /* number of devices of this type present (0: none) */
  int (*count)(void);
  /* ---- memory (bytes on device `index`): each device's allocator caches freed blocks its own
   * way (the cpu and the sim arena in runtime/block_cache.h, cuda in its caching allocator) and
   * gives the cache back itself before it reports out of memory ---- */
  void *(*alloc)(int index, size_t nbytes); /* NULL when out of memory */
  void (*free)(int index, void *p, size_t nbytes);
  size_t (*cached_bytes)(int index); /* freed bytes kept for reuse; NULL: none kept */
  void (*empty_cache)(int index);    /* gives them back; NULL: none kept */
  int (*to_host)(int index, void *dst, const void *src, size_t n);
  int (*from_host)(int index, void *dst, const void *src, size_t n);
  int (*copy)(int index, void *dst, const void *src, size_t n); /* regions may overlap */
  int (*memset)(int index, void *dst, int byte, size_t n);
  int (*synchronize)(int index);
  /* A device-side assert (CUDA's, as PyTorch's index kernels use it): a record of two int64 in
   * device memory (position + 1 and the id; zero while none failed) for a kernel to write, which
   * the device reads back with its next host wait (a copy to the host, synchronize) and raises
   * there as "op: id V at position P is outside [0, limit)". NULL with lab_fail when an earlier
   * record failed; a NULL entry (the cpu) means ids are checked on the host at once. */
  int64_t *(*check_slot)(int index, const char *op, int64_t limit);
  /* a line on the device type's state (runtime version, devices found or why none); optional */
  const char *(*describe)(void);
  /* 1 when gemm takes bf16/f16 operands itself (f32 accumulation), so they are not widened */
  int gemm_half;
  /* ---- kernels (pointers are memory of this device) ---- */
  /* Each launch returns its status: 0, or -1 with lab_fail naming the op (a launch the device
   * refused, or with LLMLAB_CUDA_LAUNCH_BLOCKING=1 a kernel that faulted); the caller raises it. */
  int (*ewise)(const lab_ew_args *a);
  int (*reduce)(const lab_red_args *a);
  int (*gemm)(const lab_gemm_args *a); /* -1 with lab_fail when the device cannot */
  int (*rand)(const lab_rand_args *a);
  /* the fused kernels of kernels/fused_ops.h, each signature written there once (the entry
   * returns LAB_FUSED_STATUS(R): a status for the void kernels); the optional ones
   * (act_bwd_bias, adamw_multi) NULL where the caller takes the plain kernels */
#define LAB_DEVICE_ENTRY_(name, R, cpu, cat, op, anchor, work, params, args) LAB_FUSED_STATUS(R)(*name) params;
  LAB_FUSED_ALL(LAB_DEVICE_ENTRY_)
#undef LAB_DEVICE_ENTRY_
  /* FlashAttention (lab_flash_args in kernels/ops.h); NULL where the device has none.
   * flash_supports: 1 when the kernels take this dtype and these head dims (q/k: D, v: Dv).
   * The kernels return 0, or -1 with lab_fail. */
  int (*flash_supports)(lab_dtype dt, int64_t D, int64_t Dv);
  int (*flash_fwd)(const lab_flash_args *a);
  int (*flash_bwd)(const lab_flash_args *a);
  int flash_strided; /* 1: the kernels take the layouts of lab_flash_args (else contiguous only) */
  /* A count the device keeps, by name, for tests and profiles; -1 for a name it does not keep,
   * NULL where it keeps none. cuda: "lt_plans" cuBLASLt plans made (descriptors, layouts and a
   * heuristic query each), "lt_heuristics" heuristic queries, "lt_matmuls" cublasLtMatmul calls,
   * "lt_workspace" the workspace bytes the last plan's preference offered the heuristic;
   * "synchronize:N" synchronize calls on device N, "ready:N" 1 once device N was set up (its
   * stream, allocator and cuBLASLt handle: a context on a GPU), "launches:N" launches routed to
   * device N, "pointer_queries" launches whose device was asked of the driver (none expected). */
  long (*counter)(const char *name);
} lab_device_ops;

/* A table's memory and launch entries from functions named prefix_entry (a device whose copy
 * serves two entries #defines the other name to it), so every table lists them the same way:
 *   static const lab_device_ops ops = {.name = "x", LAB_DEVICE_MEMORY(x) LAB_DEVICE_LAUNCHES(x) ...}; */
#define LAB_DEVICE_MEMORY(p)                                                                             \
  .count = p##_count, .alloc = p##_alloc, .free = p##_free, .cached_bytes = p##_cached_bytes,             \
  .empty_cache = p##_empty_cache, .to_host = p##_to_host, .from_host = p##_from_host, .copy = p##_copy,   \
  .memset = p##_memset, .synchronize = p##_synchronize,
#define LAB_DEVICE_LAUNCHES(p) .ewise = p##_ewise, .reduce = p##_reduce, .gemm = p##_gemm, .rand = p##_rand,

/* The registry. Each device registers itself from its own code when the program is loaded (a
 * constructor: the cpu its table, the sim and cuda an opener), so this file names none of them:
 * lab_device_ops_of calls a type's opener at the first use of that type (the sim reads its
 * settings then; cuda's opener is runtime/cuda/loader.c's, which opens the plugin) and keeps
 * the table. NULL when that type is not compiled in, or its opener gives none (why() says why).
 * lab_device_register replaces a type's table (the kernel profiler swaps the cpu's). */
typedef const lab_device_ops *(*lab_device_opener)(void);
const lab_device_ops *lab_device_ops_of(lab_device_type type);
void lab_device_register(lab_device_type type, const lab_device_ops *ops);
void lab_device_provide(lab_device_type type, lab_device_opener open, const char *(*why)(void));
/* why the type's opener gave no table ("" when it did or has not been asked) */
const char *lab_device_why(lab_device_type type);
const lab_device_ops *lab_cpu_device_ops(void);
const lab_device_ops *lab_sim_device_ops(void); /* runtime/device_sim.c: a testing device */
/* The sim's count of host synchronizations: where a GPU's stream would drain (a device-to-host
 * copy, a synchronize); lab.cuda.sim_host_syncs() reads it (runtime/device_sim.c) */
long lab_sim_host_syncs(void);
/* 1 when the sim's table is runtime/cuda's device over runtime/simrt (memory from its emulated
 * cudaMalloc, two devices): the sim then plays CUDA where no GPU is (lab.cuda.synchronize) */
int lab_sim_is_simrt(void);
/* this process's rank among the ranks of its node (lab_device_set_node_rank; 0 before) */
int lab_device_node_rank(void);
/* The sim's count of host-to-device copies; lab.cuda.sim_uploads() reads it (runtime/device_sim.c) */
long lab_sim_uploads(void);
/* runtime/cuda/cuda_device.c, in the cuda plugin (runtime/cuda/plugin.h); the engine reaches
 * it through lab_device_ops_of, whose opener opens the plugin */
const lab_device_ops *lab_cuda_device_ops(void);

/* "cpu", "sim:0", "cuda:1" into buf (PyTorch's spelling) */
const char *lab_device_str(lab_device d, char *buf, size_t n);
/* Set by world set-up: "cuda" alone then names cuda:(node_rank mod GPUs), so ranks on a node
 * with as many GPUs as ranks each drive their own (NCCL needs that; ranks beyond the GPUs
 * share one, and their GPU collectives stage through MPI). */
void lab_device_set_node_rank(int rank);
/* Parses "cpu", "sim", "cuda" (the node rank's GPU, above), "cuda:1"; checks that the device exists (lab_fail when not,
 * saying why: not compiled in, no GPU found, index out of range). */
int lab_device_parse(const char *op, const char *s, lab_device *out);
/* Devices of the type present on this machine (cpu and sim: 1). */
int lab_device_count(lab_device_type type);

/* Where factories put new tensors when no device is named (lab.set_default_device,
 * llmlab --device, LLMLAB_DEVICE); the cpu at start. */
lab_device lab_default_device(void);
void lab_set_default_device(lab_device d);

/* One line on CUDA for llmlab --version: compiled in or not, the devices found, or why none. */
const char *lab_cuda_status(void);

#endif
