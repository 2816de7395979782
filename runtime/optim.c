/* The fused AdamW step: checks here, the update in one pass on the parameters' device. */
#include "optim.h"

#include "error.h"
#include "transfer.h"

int lab_adamw_(lab_tensor *p, lab_tensor *g, lab_tensor *m, lab_tensor *v, const lab_adamw_opts *o) {
  if (p->dtype != g->dtype || p->dtype != m->dtype || p->dtype != v->dtype || !lab_is_contiguous(p) ||
      !lab_is_contiguous(g) || !lab_is_contiguous(m) || !lab_is_contiguous(v) || lab_numel(p) != lab_numel(g) ||
      lab_numel(p) != lab_numel(m) || lab_numel(p) != lab_numel(v))
    return lab_fail("adamw", "parameter, grad and states must be contiguous, same size and dtype (%s, %s, %s, %s)",
                    lab_dtype_name(p->dtype), lab_dtype_name(g->dtype), lab_dtype_name(m->dtype),
                    lab_dtype_name(v->dtype));
  if (p->dtype != LAB_F32 && p->dtype != LAB_F64)
    return lab_fail("adamw", "the fused step takes f32 or f64 parameters, got %s", lab_dtype_name(p->dtype));
  lab_device dev;
  lab_tensor *all[4] = {p, g, m, v};
  if (lab_common_device("adamw", 4, all, &dev) < 0) return -1;
  lab_device_ops_of(dev.type)->adamw(p->dtype, lab_data(p), lab_data(g), lab_data(m), lab_data(v), lab_numel(p), o->lr,
                                     o->beta1, o->beta2, o->eps, o->weight_decay, o->step);
  return 0;
}
