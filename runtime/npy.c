/* .npy reading and writing. The header is a Python dict literal; only the three keys NumPy
 * writes are accepted, with little-endian (or byte-sized) types and C order. */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "size.h"
#include "transfer.h"

static const struct { const char *descr; lab_dtype dt; } types[] = {
    {"<f4", LAB_F32}, {"<f8", LAB_F64}, {"<i4", LAB_I32}, {"<i8", LAB_I64}, {"<f2", LAB_F16}, {"|b1", LAB_BOOL},
};

static int parse_header(const char *path, const char *h, lab_dtype *dt, int *ndim, int64_t *shape) {
  const char *d = strstr(h, "'descr'");
  const char *f = strstr(h, "'fortran_order'");
  const char *s = strstr(h, "'shape'");
  if (!d || !f || !s) return lab_fail("load_npy", "%s: header lacks descr, fortran_order or shape", path);
  d = strchr(d + 7, '\'');
  if (!d) return lab_fail("load_npy", "%s: bad descr", path);
  int found = 0;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strncmp(d + 1, types[i].descr, 3) == 0 && d[4] == '\'') {
      *dt = types[i].dt;
      found = 1;
    }
  if (!found) {
    char got[16] = {0};
    sscanf(d + 1, "%15[^']", got);
    return lab_fail("load_npy", "%s: unsupported dtype '%s' (f4, f8, f2, i4, i8, b1 little-endian)", path, got);
  }
  const char *fv = strchr(f + 15, ':');
  if (!fv) return lab_fail("load_npy", "%s: bad fortran_order", path);
  while (*++fv == ' ') {}
  if (strncmp(fv, "False", 5) != 0) return lab_fail("load_npy", "%s: Fortran-ordered arrays are not supported", path);
  const char *p = strchr(s + 7, '(');
  if (!p) return lab_fail("load_npy", "%s: bad shape", path);
  p++;
  *ndim = 0;
  for (;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0) return lab_fail("load_npy", "%s: bad shape entry", path);
    if (errno == ERANGE) return lab_fail("load_npy", "%s: shape entry %.40s does not fit in 64 bits", path, p);
    if (*ndim >= LAB_MAX_DIMS) return lab_fail("load_npy", "%s: more than %d dimensions", path, LAB_MAX_DIMS);
    shape[(*ndim)++] = v;
    p = end;
  }
  char op[300];
  snprintf(op, sizeof op, "load_npy: %s", path);
  return lab_check_size(op, *ndim, shape, lab_dtype_size(*dt), NULL);
}

lab_tensor *lab_npy_load(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    lab_fail("load_npy", "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  unsigned char pre[12];
  lab_tensor *t = NULL;
  char *header = NULL;
  if (fread(pre, 1, 10, fp) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    lab_fail("load_npy", "%s is not a .npy file (bad magic)", path);
    goto done;
  }
  uint32_t hlen;
  if (pre[6] == 1) {
    hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, fp) != 2) {
      lab_fail("load_npy", "%s: truncated header", path);
      goto done;
    }
    hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
  } else {
    lab_fail("load_npy", "%s: unknown .npy version %d", path, pre[6]);
    goto done;
  }
  if (hlen > (1u << 20)) {
    lab_fail("load_npy", "%s: header of %u bytes is implausible", path, hlen);
    goto done;
  }
  header = calloc(hlen + 1, 1);
  if (!header || fread(header, 1, hlen, fp) != hlen) {
    lab_fail("load_npy", "%s: truncated header", path);
    goto done;
  }
  lab_dtype dt = LAB_F32;
  int ndim = 0;
  int64_t shape[LAB_MAX_DIMS];
  if (parse_header(path, header, &dt, &ndim, shape) < 0) goto done;
  int64_t numel;
  lab_check_size("load_npy", ndim, shape, lab_dtype_size(dt), &numel); /* checked above */
  /* a header promising more data than the file holds is refused before allocating */
  long here = ftell(fp);
  if (here < 0 || fseek(fp, 0, SEEK_END) != 0) {
    lab_fail("load_npy", "%s: cannot seek: %s", path, strerror(errno));
    goto done;
  }
  long size = ftell(fp);
  if (size < here || fseek(fp, here, SEEK_SET) != 0 || (int64_t)(size - here) < numel * (int64_t)lab_dtype_size(dt)) {
    lab_fail("load_npy", "%s: data is shorter than the %lld bytes its header promises (shape %s)", path,
             (long long)(numel * (int64_t)lab_dtype_size(dt)), lab_dims_str(ndim, shape, (char[256]){0}, 256));
    goto done;
  }
  t = lab_tensor_empty(dt, ndim, shape);
  if (!t) goto done;
  size_t want = lab_nbytes(t);
  if (want > 0 && fread(lab_data(t), 1, want, fp) != want) {
    lab_fail("load_npy", "%s: data is shorter than the %zu bytes its header promises", path, want);
    lab_tensor_release(t);
    t = NULL;
  }
done:
  free(header);
  fclose(fp);
  return t;
}

static const char *descr_of(lab_dtype dt) {
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (types[i].dt == dt) return types[i].descr;
  return NULL;
}

int lab_npy_save(lab_tensor *t, const char *path) {
  /* numpy has no bf16 or FP8: both widen to f32 exactly */
  lab_tensor *src = t->dtype == LAB_BF16 || lab_dtype_is_fp8(t->dtype) ? lab_to_dtype(t, LAB_F32) : (lab_tensor_retain(t), t);
  lab_tensor *h = src ? lab_to_host(src) : NULL;
  lab_tensor *c = h ? lab_contiguous(h) : NULL;
  lab_tensor_release(src);
  lab_tensor_release(h);
  if (!c) return -1;
  /* the shape as a Python tuple: (), (3,), (2, 3) */
  char dict[512];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr_of(c->dtype));
  for (int i = 0; i < c->ndim; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, i ? ", %lld" : "%lld", (long long)c->shape[i]);
  n += snprintf(dict + n, sizeof dict - (size_t)n, c->ndim == 1 ? ",), }" : "), }");
  /* pad with spaces so magic + header ends on a 64-byte boundary, then a newline */
  int total = 10 + n + 1;
  int pad = (64 - total % 64) % 64;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  FILE *fp = fopen(tmp, "wb");
  if (!fp) {
    lab_tensor_release(c);
    return lab_fail("save_npy", "cannot write %s: %s", tmp, strerror(errno));
  }
  uint16_t hlen = (uint16_t)(n + pad + 1);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
  int ok = fwrite(pre, 1, 10, fp) == 10 && fwrite(dict, 1, (size_t)n, fp) == (size_t)n;
  for (int i = 0; ok && i < pad; i++) ok = fputc(' ', fp) != EOF;
  ok = ok && fputc('\n', fp) != EOF;
  /* an empty tensor has no data pointer, and fwrite(NULL, ..) is undefined even for 0 bytes */
  ok = ok && (lab_nbytes(c) == 0 || fwrite(lab_data(c), 1, lab_nbytes(c), fp) == lab_nbytes(c));
  ok = ok && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
  ok = (fclose(fp) == 0) && ok;
  lab_tensor_release(c);
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return lab_fail("save_npy", "writing %s failed: %s", path, strerror(errno));
  }
  return 0;
}
