/* The fused AdamW step: checks here, the update in one pass on the parameters' device. */
#include "optim.h"

#include <stdlib.h>

#include "error.h"
#include "transfer.h"

/* the checks of one parameter's step; its device into *dev */
static int adamw_check(lab_tensor *p, lab_tensor *g, lab_tensor *m, lab_tensor *v, lab_device *dev) {
  if (p->dtype != g->dtype || p->dtype != m->dtype || p->dtype != v->dtype || !lab_is_contiguous(p) ||
      !lab_is_contiguous(g) || !lab_is_contiguous(m) || !lab_is_contiguous(v) || lab_numel(p) != lab_numel(g) ||
      lab_numel(p) != lab_numel(m) || lab_numel(p) != lab_numel(v))
    return lab_fail("adamw", "parameter, grad and states must be contiguous, same size and dtype (%s, %s, %s, %s)",
                    lab_dtype_name(p->dtype), lab_dtype_name(g->dtype), lab_dtype_name(m->dtype),
                    lab_dtype_name(v->dtype));
  if (p->dtype != LAB_F32 && p->dtype != LAB_F64)
    return lab_fail("adamw", "the fused step takes f32 or f64 parameters, got %s", lab_dtype_name(p->dtype));
  lab_tensor *all[4] = {p, g, m, v};
  return lab_common_device("adamw", 4, all, dev);
}

int lab_adamw_(lab_tensor *p, lab_tensor *g, lab_tensor *m, lab_tensor *v, const lab_adamw_opts *o) {
  lab_device dev;
  if (adamw_check(p, g, m, v, &dev) < 0) return -1;
  return lab_device_ops_of(dev.type)->adamw(p->dtype, lab_data(p), lab_data(g), lab_data(m), lab_data(v), lab_numel(p),
                                            o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->step);
}

int lab_adamw_multi_(int count, lab_tensor **p, lab_tensor **g, lab_tensor **m, lab_tensor **v, const double *wd,
                     const lab_adamw_opts *o) {
  if (count <= 0) return 0;
  int same = 1;
  lab_device d0 = lab_device_of(p[0]);
  for (int i = 0; i < count; i++) {
    lab_device dev;
    if (adamw_check(p[i], g[i], m[i], v[i], &dev) < 0) return -1;
    same = same && p[i]->dtype == p[0]->dtype && lab_device_eq(dev, d0);
  }
  const lab_device_ops *ops = lab_device_ops_of(d0.type);
  void **pp = same && ops->adamw_multi ? malloc(sizeof(void *) * 4 * (size_t)count) : NULL;
  int64_t *n = pp ? malloc(sizeof(int64_t) * (size_t)count) : NULL;
  if (!n) { /* mixed dtypes or devices, no multi-tensor kernel or no memory: one at a time */
    free(pp);
    for (int i = 0; i < count; i++) {
      lab_adamw_opts one = *o;
      one.weight_decay = wd[i];
      if (lab_adamw_(p[i], g[i], m[i], v[i], &one) < 0) return -1;
    }
    return 0;
  }
  void **pg = pp + count, **pm = pg + count, **pv = pm + count;
  for (int i = 0; i < count; i++) {
    pp[i] = lab_data(p[i]), pg[i] = lab_data(g[i]), pm[i] = lab_data(m[i]), pv[i] = lab_data(v[i]);
    n[i] = lab_numel(p[i]);
  }
  int rc = ops->adamw_multi(p[0]->dtype, count, pp, (const void *const *)pg, pm, pv, n, wd, o->lr, o->beta1, o->beta2,
                            o->eps, o->step);
  free(pp);
  free(n);
  return rc;
}
