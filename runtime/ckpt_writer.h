/* A checkpoint writer job: the files one rank writes for a save (safetensors files and byte
 * files such as its JSON index), each written atomically through ckpt_io. A job runs in the
 * caller (synchronous save) or in a background pthread (asynchronous save: training goes on
 * while the thread computes checksums and writes; no Lua runs in the thread). Tensor bytes are
 * borrowed: the caller keeps them alive and unchanged until the job has been waited for. */
#ifndef LAB_RUNTIME_CKPT_WRITER_H
#define LAB_RUNTIME_CKPT_WRITER_H

#include <stddef.h>

#include "safetensors.h"

typedef struct lab_ckpt_job lab_ckpt_job;

lab_ckpt_job *lab_ckpt_job_new(void);
/* A safetensors file of n tensors (names and metadata copied, data borrowed). */
int lab_ckpt_job_add_safetensors(lab_ckpt_job *job, const char *path, const lab_st_tensor *ts, size_t n,
                                 const char *const *meta_keys, const char *const *meta_values, size_t nmeta);
/* A file holding these bytes (copied). */
int lab_ckpt_job_add_bytes(lab_ckpt_job *job, const char *path, const void *bytes, size_t n);

/* Runs the job here. Returns 0 or -1 (lab_fail). */
int lab_ckpt_job_run(lab_ckpt_job *job);
/* Starts the job in a background thread. Returns 0 or -1 if the thread cannot start. */
int lab_ckpt_job_start(lab_ckpt_job *job);
/* 1 when a started job has finished (or none was started), 0 while it runs. */
int lab_ckpt_job_finished(lab_ckpt_job *job);
/* Waits for a started job; returns its result (0, or -1 with its message through lab_fail). */
int lab_ckpt_job_wait(lab_ckpt_job *job);
/* Waits if needed, then frees. */
void lab_ckpt_job_free(lab_ckpt_job *job);

/* A tensor's contiguous host bytes as a safetensors entry (t must be contiguous). */
int lab_st_tensor_of(lab_tensor *t, const char *name, lab_st_tensor *out);
/* A new tensor holding entry i of a parsed file (bytes is the whole file). */
lab_tensor *lab_st_tensor_at(const lab_st_header *h, const unsigned char *bytes, size_t i);

#endif
