/* Differentiable collectives (see ops_dist.c). dims are 0-based. */
#ifndef LAB_RUNTIME_AUTOGRAD_OPS_DIST_H
#define LAB_RUNTIME_AUTOGRAD_OPS_DIST_H

#include "../dist/dist.h"
#include "autograd.h"

/* y = sum over ranks of x; dx = sum over ranks of dy (the true gradient) */
lab_tensor *lab_ad_all_reduce(lab_group *g, lab_tensor *x);
/* y = x of every rank concatenated along dim; dx = reduce_scatter(dy) */
lab_tensor *lab_ad_all_gather(lab_group *g, lab_tensor *x, int dim);
/* y = this rank's slice along dim of the sum over ranks; dx = all_gather(dy) */
lab_tensor *lab_ad_reduce_scatter(lab_group *g, lab_tensor *x, int dim);
/* Megatron's f: identity forward, all-reduce backward */
lab_tensor *lab_ad_copy_to_region(lab_group *g, lab_tensor *x);
/* Megatron's g: all-reduce forward, identity backward */
lab_tensor *lab_ad_reduce_from_region(lab_group *g, lab_tensor *x);
/* all-gather along dim forward, this rank's slice backward */
lab_tensor *lab_ad_gather_from_region(lab_group *g, lab_tensor *x, int dim);
/* this rank's slice forward, all-gather backward */
lab_tensor *lab_ad_scatter_to_region(lab_group *g, lab_tensor *x, int dim);
/* uneven all-to-all of x's rows (dim 1): in_splits[i] rows go to rank i, out_splits[j]
 * rows come from rank j (NULL: even); dx is the reverse exchange of dy */
lab_tensor *lab_ad_all_to_all_single(lab_group *g, lab_tensor *x, const int64_t *out_splits, const int64_t *in_splits);

#endif
