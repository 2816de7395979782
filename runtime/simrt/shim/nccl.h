/* The NCCL-API subset that runtime/dist/nccl.c uses, for its sim compile (it finds this header
 * before any real nccl.h: the sim's object library has only runtime/simrt/shim on its include
 * path). Every ncclX is renamed lab_simrt_ncclX, and nccl.c's own exported names
 * (lab_nccl_*) lab_simrt_nccl_*, so the real libnccl and its plugin can share the process
 * (unit.simrt_symbols checks that llmlab defines no nccl[A-Z] name). Implemented on MPI in
 * runtime/simrt/nccl_mpi.c: communicators from a unique id, the collectives, send/recv and
 * group calls, ordered on the emulated streams, ncclCommAbort and ncclCommGetAsyncError. */
#ifndef LAB_SIMRT_NCCL_H
#define LAB_SIMRT_NCCL_H

#include <stddef.h>

#include "cuda_runtime.h"

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
} ncclResult_t;

typedef enum {
  ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
  ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct ncclComm *ncclComm_t;

/* nccl.c's exported names, for the sim compile */
#define lab_nccl_gpu_key lab_simrt_nccl_gpu_key
#define lab_nccl_unique_id lab_simrt_nccl_unique_id
#define lab_nccl_group_init lab_simrt_nccl_group_init
#define lab_nccl_backend lab_simrt_nccl_backend
#define lab_nccl_version lab_simrt_nccl_version

#define ncclGetVersion lab_simrt_ncclGetVersion
#define ncclGetUniqueId lab_simrt_ncclGetUniqueId
#define ncclCommInitRank lab_simrt_ncclCommInitRank
#define ncclCommDestroy lab_simrt_ncclCommDestroy
#define ncclCommAbort lab_simrt_ncclCommAbort
#define ncclCommGetAsyncError lab_simrt_ncclCommGetAsyncError
#define ncclGetErrorString lab_simrt_ncclGetErrorString
#define ncclGetLastError lab_simrt_ncclGetLastError
#define ncclAllReduce lab_simrt_ncclAllReduce
#define ncclBroadcast lab_simrt_ncclBroadcast
#define ncclReduce lab_simrt_ncclReduce
#define ncclAllGather lab_simrt_ncclAllGather
#define ncclReduceScatter lab_simrt_ncclReduceScatter
#define ncclSend lab_simrt_ncclSend
#define ncclRecv lab_simrt_ncclRecv
#define ncclGroupStart lab_simrt_ncclGroupStart
#define ncclGroupEnd lab_simrt_ncclGroupEnd

#ifdef __cplusplus
extern "C" {
#endif
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s);
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t s);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
#ifdef __cplusplus
}
#endif

#endif
