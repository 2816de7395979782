/* Joining and splitting along a dim: cat, stack (copies); split, chunk (views). */
#ifndef LAB_RUNTIME_JOIN_H
#define LAB_RUNTIME_JOIN_H

#include "tensor.h"

lab_tensor *lab_cat(int n, lab_tensor **ts, int dim);
lab_tensor *lab_stack(int n, lab_tensor **ts, int dim);
/* Views of `size`-long pieces along dim (the last may be shorter). Returns the count, or
 * -1; *out is malloc'ed and holds new references. */
int lab_split(lab_tensor *t, int64_t size, int dim, lab_tensor ***out);
int lab_chunk(lab_tensor *t, int chunks, int dim, lab_tensor ***out);

#endif
