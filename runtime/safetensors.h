/* safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian
 * header length N, N bytes of JSON {name: {dtype, shape, data_offsets}, "__metadata__":
 * {string: string}}, then the tensors' bytes. Parsing checks every entry against the file:
 * known dtype, shape within limits and without overflow, offsets inside the data and equal
 * to shape x element size, no overlap, no unclaimed bytes. Writing adds a crc32 per tensor to
 * the metadata ("crc32:<name>"), which reading verifies when present. */
#ifndef LAB_RUNTIME_SAFETENSORS_H
#define LAB_RUNTIME_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "tensor.h"

#define LAB_ST_MAX_HEADER (100u << 20) /* the format's own limit */

typedef struct {
  const char *name;   /* points into the parsed header */
  lab_dtype dtype;
  int ndim;
  int64_t shape[LAB_MAX_DIMS];
  uint64_t begin, end; /* byte offsets into the data section */
  int has_crc;
  uint32_t crc;
} lab_st_entry;

typedef struct {
  lab_json json;          /* the parsed header (entries point into it) */
  size_t n;
  lab_st_entry *entries;  /* in header order */
  const lab_json *metadata; /* __metadata__ object or NULL */
  uint64_t data_start;    /* 8 + N */
} lab_st_header;

/* The safetensors dtype name of t ("F32", "BF16", ...), and back (-1 if unknown). */
const char *lab_st_dtype_name(lab_dtype t);
int lab_st_dtype_from_name(const char *name);

/* Parses and checks the header of a safetensors file held in bytes[0..len) (the whole file:
 * offsets are checked against it). The fuzzing entry point. Returns 0 or -1 (lab_fail, the
 * message naming `what`, e.g. the path). */
int lab_st_parse(const unsigned char *bytes, size_t len, const char *what, lab_st_header *out);
void lab_st_header_free(lab_st_header *h);

/* Reads only the JSON header of the safetensors file at path (the length checked against the
 * file's size) into *header: what a reader needs to check a file's metadata without its data. */
int lab_st_read_header_json(const char *path, lab_json *header);

/* A tensor to write: contiguous host bytes. */
typedef struct {
  const char *name;
  lab_dtype dtype;
  int ndim;
  int64_t shape[LAB_MAX_DIMS];
  const void *data;
  size_t nbytes;
} lab_st_tensor;

/* The whole file (header with crc32 metadata, padded to 8 bytes, then the data) as one
 * malloc'd header buffer; the data follows in the order given. meta_keys/meta_values may be
 * NULL when nmeta is 0. Returns 0 or -1 (lab_fail). */
int lab_st_build_header(const lab_st_tensor *ts, size_t n, const char *const *meta_keys,
                        const char *const *meta_values, size_t nmeta, char **header, size_t *header_len);

#endif
