/* A checkpoint writer job: the files one rank writes for a save (safetensors files and byte
 * files such as its JSON index), each written atomically through ckpt_io. A job runs in the
 * caller (synchronous save) or in a background pthread (asynchronous save: training goes on
 * while the thread computes checksums and writes; no Lua runs in the thread). The tensors' bytes
 * are read while the job runs: an asynchronous caller passes snapshots nobody else changes. */
#ifndef LAB_RUNTIME_CKPT_WRITER_H
#define LAB_RUNTIME_CKPT_WRITER_H

#include <stddef.h>

#include "safetensors.h"

typedef struct lab_ckpt_job lab_ckpt_job;

lab_ckpt_job *lab_ckpt_job_new(void);
/* A safetensors file of n tensors (names and metadata copied). The job holds a reference to a
 * contiguous host copy of each tensor (the tensor itself when it already is one), taken and
 * released on the calling thread. */
int lab_ckpt_job_add_safetensors(lab_ckpt_job *job, const char *path, const char *const *names,
                                 lab_tensor *const *ts, size_t n, const char *const *meta_keys,
                                 const char *const *meta_values, size_t nmeta);
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
/* Waits if needed, then frees (on the thread that made the job: it releases tensors). */
void lab_ckpt_job_free(lab_ckpt_job *job);

/* A new cpu tensor holding entry i of a parsed file (bytes is the whole file). */
lab_tensor *lab_st_tensor_at(const lab_st_header *h, const unsigned char *bytes, size_t i);

#endif
