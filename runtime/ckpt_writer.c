/* Checkpoint writer jobs, synchronous or on a pthread; see ckpt_writer.h. */
#include "ckpt_writer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_io.h"
#include "error.h"
#include "transfer.h"

typedef struct {
  char *path;
  /* a safetensors file */
  size_t n;
  lab_st_tensor *ts;
  lab_tensor **hold; /* the contiguous host tensors ts point into */
  size_t nmeta;
  char **meta_keys, **meta_values;
  /* or plain bytes */
  char *bytes;
  size_t nbytes;
} file_spec;

struct lab_ckpt_job {
  size_t nfiles;
  file_spec *files;
  int started;
  atomic_int finished;
  int status;
  char err[1024];
  pthread_t thread;
};

lab_ckpt_job *lab_ckpt_job_new(void) {
  lab_ckpt_job *job = calloc(1, sizeof *job);
  if (!job) lab_fail("ckpt", "out of memory");
  else atomic_store(&job->finished, 1);
  return job;
}

static char *dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static file_spec *add_file(lab_ckpt_job *job, const char *path) {
  file_spec *f = realloc(job->files, (job->nfiles + 1) * sizeof *f);
  if (!f) return NULL;
  job->files = f;
  f = &job->files[job->nfiles];
  memset(f, 0, sizeof *f);
  f->path = dup(path);
  if (!f->path) return NULL;
  job->nfiles++;
  return f;
}

/* t's contiguous host bytes as a safetensors entry: *held is t itself or a host copy */
static int host_entry(lab_tensor *t, const char *name, lab_st_tensor *out, lab_tensor **held) {
  if (!t->storage->data && lab_nbytes(t))
    return lab_fail("ckpt", "%s: the tensor's data is not here (a released ZeRO-3 parameter?)", name);
  lab_tensor *h = lab_to_host(t);
  lab_tensor *c = h ? lab_contiguous(h) : NULL;
  if (h) lab_tensor_release(h);
  if (!c) return -1;
  *held = c;
  memset(out, 0, sizeof *out);
  out->dtype = c->dtype;
  out->ndim = c->ndim;
  memcpy(out->shape, c->shape, sizeof c->shape);
  out->nbytes = lab_nbytes(c);
  out->data = lab_data(c);
  return 0;
}

int lab_ckpt_job_add_safetensors(lab_ckpt_job *job, const char *path, const char *const *names,
                                 lab_tensor *const *ts, size_t n, const char *const *meta_keys,
                                 const char *const *meta_values, size_t nmeta) {
  file_spec *f = add_file(job, path);
  if (!f) return lab_fail("ckpt", "out of memory");
  f->ts = calloc(n ? n : 1, sizeof *f->ts);
  f->hold = calloc(n ? n : 1, sizeof *f->hold);
  f->meta_keys = calloc(nmeta ? nmeta : 1, sizeof *f->meta_keys);
  f->meta_values = calloc(nmeta ? nmeta : 1, sizeof *f->meta_values);
  if (!f->ts || !f->hold || !f->meta_keys || !f->meta_values) return lab_fail("ckpt", "out of memory");
  for (size_t i = 0; i < n; i++) {
    if (host_entry(ts[i], names[i], &f->ts[i], &f->hold[i]) != 0) return -1;
    f->n = i + 1;
    f->ts[i].name = dup(names[i]);
    if (!f->ts[i].name) return lab_fail("ckpt", "out of memory");
  }
  for (size_t i = 0; i < nmeta; i++) {
    f->meta_keys[i] = dup(meta_keys[i]);
    f->meta_values[i] = dup(meta_values[i]);
    f->nmeta = i + 1;
    if (!f->meta_keys[i] || !f->meta_values[i]) return lab_fail("ckpt", "out of memory");
  }
  return 0;
}

int lab_ckpt_job_add_bytes(lab_ckpt_job *job, const char *path, const void *bytes, size_t n) {
  file_spec *f = add_file(job, path);
  if (!f) return lab_fail("ckpt", "out of memory");
  f->bytes = malloc(n ? n : 1);
  if (!f->bytes) return lab_fail("ckpt", "out of memory");
  memcpy(f->bytes, bytes, n);
  f->nbytes = n;
  return 0;
}

static int write_one(const file_spec *f) {
  if (f->bytes) {
    lab_io_piece piece = {f->bytes, f->nbytes};
    return lab_ckpt_write_file(f->path, &piece, 1);
  }
  char *header;
  size_t hlen;
  if (lab_st_build_header(f->ts, f->n, (const char *const *)f->meta_keys, (const char *const *)f->meta_values,
                          f->nmeta, &header, &hlen) != 0)
    return -1;
  lab_io_piece *pieces = malloc((f->n + 1) * sizeof *pieces);
  if (!pieces) {
    free(header);
    return lab_fail("ckpt", "out of memory");
  }
  pieces[0] = (lab_io_piece){header, hlen};
  for (size_t i = 0; i < f->n; i++) pieces[i + 1] = (lab_io_piece){f->ts[i].data, f->ts[i].nbytes};
  int rc = lab_ckpt_write_file(f->path, pieces, f->n + 1);
  free(pieces);
  free(header);
  return rc;
}

int lab_ckpt_job_run(lab_ckpt_job *job) {
  for (size_t i = 0; i < job->nfiles; i++)
    if (write_one(&job->files[i]) != 0) return -1;
  return 0;
}

static void *thread_main(void *arg) {
  lab_ckpt_job *job = arg;
  job->status = lab_ckpt_job_run(job);
  if (job->status != 0) snprintf(job->err, sizeof job->err, "%s", lab_last_error()); /* lab_fail is per thread */
  atomic_store(&job->finished, 1);
  return NULL;
}

int lab_ckpt_job_start(lab_ckpt_job *job) {
  if (job->started) return lab_fail("ckpt", "the job was already started");
  atomic_store(&job->finished, 0);
  int e = pthread_create(&job->thread, NULL, thread_main, job);
  if (e != 0) {
    atomic_store(&job->finished, 1);
    return lab_fail("ckpt", "cannot start the writer thread: %s", strerror(e));
  }
  job->started = 1;
  return 0;
}

int lab_ckpt_job_finished(lab_ckpt_job *job) { return atomic_load(&job->finished); }

int lab_ckpt_job_wait(lab_ckpt_job *job) {
  if (!job->started) return 0;
  pthread_join(job->thread, NULL);
  job->started = 0;
  if (job->status != 0) { /* the thread's message already reads "ckpt: ..." */
    const char *msg = strncmp(job->err, "ckpt: ", 6) == 0 ? job->err + 6 : job->err;
    return lab_fail("ckpt", "%s", msg);
  }
  return 0;
}

void lab_ckpt_job_free(lab_ckpt_job *job) {
  if (!job) return;
  if (job->started) pthread_join(job->thread, NULL);
  for (size_t i = 0; i < job->nfiles; i++) {
    file_spec *f = &job->files[i];
    free(f->path);
    for (size_t k = 0; k < f->n; k++) {
      free((char *)f->ts[k].name);
      lab_tensor_release(f->hold[k]);
    }
    free(f->hold);
    for (size_t k = 0; k < f->nmeta; k++) {
      free(f->meta_keys[k]);
      free(f->meta_values[k]);
    }
    free(f->ts);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->bytes);
  }
  free(job->files);
  free(job);
}

lab_tensor *lab_st_tensor_at(const lab_st_header *h, const unsigned char *bytes, size_t i) {
  const lab_st_entry *e = &h->entries[i];
  return lab_tensor_from_host(lab_cpu(), e->dtype, e->ndim, e->shape, bytes + h->data_start + e->begin);
}
