/* Tensor printing. Two passes over the shown elements: the first picks the number format
 * (integers, fixed with 4 decimals, or scientific) and the column width, the second prints. */
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu/convert.h"
#include "error.h"
#include "strbuf.h"
#include "transfer.h"

#define EDGE 3
#define SUMMARIZE_OVER 1000

typedef struct {
  const lab_tensor *t;
  int summarize;
  int is_float, is_bool;
  int mode; /* 0: integral floats "1.", 1: fixed "%.4f", 2: scientific "%.4e" */
  int width;
  double max_abs, min_abs;
  int all_integral, any_finite;
} fmt_state;

static const char *elem_ptr(const lab_tensor *t, const int64_t *idx) {
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
  return (const char *)t->storage->data + off * (int64_t)lab_dtype_size(t->dtype);
}

static int elem_text(const fmt_state *f, const char *p, char *out, size_t n) {
  if (f->is_bool) return snprintf(out, n, "%s", *(const uint8_t *)p ? "true" : "false");
  if (!f->is_float) return snprintf(out, n, "%lld", (long long)lab_get_i64(f->t->dtype, p));
  double v = lab_get_f64(f->t->dtype, p);
  if (isnan(v)) return snprintf(out, n, "nan");
  if (isinf(v)) return snprintf(out, n, v > 0 ? "inf" : "-inf");
  if (f->mode == 0) return snprintf(out, n, "%.0f.", v);
  if (f->mode == 1) return snprintf(out, n, "%.4f", v);
  return snprintf(out, n, "%.4e", v);
}

/* Visit every shown element in order; `visit` gets its pointer. */
typedef void (*visit_fn)(fmt_state *f, const char *p, void *ctx);

static void scan(fmt_state *f, int dim, int64_t *idx, visit_fn fn, void *ctx) {
  const lab_tensor *t = f->t;
  if (dim == t->ndim) {
    fn(f, elem_ptr(t, idx), ctx);
    return;
  }
  int64_t n = t->shape[dim];
  for (int64_t i = 0; i < n; i++) {
    if (f->summarize && n > 2 * EDGE && i == EDGE) i = n - EDGE;
    idx[dim] = i;
    scan(f, dim + 1, idx, fn, ctx);
  }
}

static void measure(fmt_state *f, const char *p, void *ctx) {
  (void)ctx;
  if (f->is_float) {
    double v = lab_get_f64(f->t->dtype, p);
    if (isfinite(v)) {
      double a = fabs(v);
      f->any_finite = 1;
      if (a > f->max_abs) f->max_abs = a;
      if (a > 0 && a < f->min_abs) f->min_abs = a;
      if (v != floor(v)) f->all_integral = 0;
    }
  }
}

static void widen(fmt_state *f, const char *p, void *ctx) {
  (void)ctx;
  char b[64];
  int w = elem_text(f, p, b, sizeof b);
  if (w > f->width) f->width = w;
}

static void print_rec(fmt_state *f, lab_strbuf *s, int dim, int64_t *idx, int indent) {
  const lab_tensor *t = f->t;
  char b[64];
  if (dim == t->ndim) {
    elem_text(f, elem_ptr(t, idx), b, sizeof b);
    lab_strbuf_printf(s, "%*s", f->width, b);
    return;
  }
  lab_strbuf_printf(s, "[");
  int64_t n = t->shape[dim];
  for (int64_t i = 0; i < n; i++) {
    if (f->summarize && n > 2 * EDGE && i == EDGE) {
      if (dim == t->ndim - 1) lab_strbuf_printf(s, "...");
      else lab_strbuf_printf(s, "...");
      i = n - EDGE;
      lab_strbuf_printf(s, dim == t->ndim - 1 ? ", " : ",\n%*s", indent + 1, "");
    }
    idx[dim] = i;
    print_rec(f, s, dim + 1, idx, indent + 1);
    if (i + 1 < n) {
      if (dim == t->ndim - 1) lab_strbuf_printf(s, ", ");
      else {
        lab_strbuf_printf(s, ",");
        for (int k = dim; k < t->ndim - 1; k++) lab_strbuf_printf(s, "\n");
        lab_strbuf_printf(s, "%*s", indent + 1, "");
      }
    }
  }
  lab_strbuf_printf(s, "]");
}

static char *format_host(const lab_tensor *t, lab_device dev);

/* A tensor on another device is printed from a host copy, its device named as PyTorch does. */
char *lab_format(const lab_tensor *t) {
  lab_device dev = lab_device_of(t);
  if (dev.type == LAB_DEV_CPU) return format_host(t, dev);
  lab_tensor *h = lab_to_host((lab_tensor *)t);
  if (!h) return NULL;
  char *s = format_host(h, dev);
  lab_tensor_release(h);
  return s;
}

static char *format_host(const lab_tensor *t, lab_device dev) {
  fmt_state f = {.t = t, .is_float = lab_dtype_is_float(t->dtype), .is_bool = t->dtype == LAB_BOOL,
                 .min_abs = INFINITY, .all_integral = 1};
  f.summarize = lab_numel(t) > SUMMARIZE_OVER;
  int64_t idx[LAB_MAX_DIMS] = {0};
  if (lab_numel(t) > 0) scan(&f, 0, idx, measure, NULL);
  if (f.is_float) {
    if (f.any_finite && f.all_integral && f.max_abs < 1e8) f.mode = 0;
    else if (f.any_finite && (f.max_abs >= 1e8 || f.min_abs < 1e-4 || f.max_abs / f.min_abs > 1e5))
      f.mode = 2;
    else f.mode = 1;
  }
  if (lab_numel(t) > 0) scan(&f, 0, idx, widen, NULL);
  lab_strbuf s = {0};
  const char *prefix = "tensor(";
  lab_strbuf_printf(&s, "%s", prefix);
  if (lab_numel(t) == 0) lab_strbuf_printf(&s, "[]");
  else print_rec(&f, &s, 0, idx, (int)strlen(prefix));
  char shape[160];
  lab_strbuf_printf(&s, ", shape=%s, dtype=%s", lab_shape_str(t, shape, sizeof shape), lab_dtype_name(t->dtype));
  char name[32];
  if (dev.type != LAB_DEV_CPU) lab_strbuf_printf(&s, ", device='%s'", lab_device_str(dev, name, sizeof name));
  lab_strbuf_printf(&s, ")");
  if (s.oom) {
    free(s.b);
    lab_fail("tostring", "out of memory");
    return NULL;
  }
  return s.b;
}
