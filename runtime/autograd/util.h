/* Small helpers shared by the backward functions (internal to runtime/autograd). */
#ifndef LAB_RUNTIME_AUTOGRAD_UTIL_H
#define LAB_RUNTIME_AUTOGRAD_UTIL_H

#include "../ewise.h"
#include "autograd.h"

static inline int dtype_valid(int d) { return d >= 0 && d < LAB_NDTYPES; }

/* whether input i of the node has somewhere for its gradient to go */
static inline int ag_wants(const lab_node *n, int i) { return n->next[i].node || n->next[i].leaf; }

static inline lab_tensor *ag_ref(lab_tensor *t) {
  lab_tensor_retain(t);
  return t;
}

/* releases out (an op result) and returns NULL, for failure paths */
lab_tensor *ag_drop(lab_tensor *out);
/* attaches n to out (rc from the saves: -1 drops both; n NULL, a failed lab_node_new, drops out) */
lab_tensor *ag_finish(lab_node *n, lab_tensor *out, int rc);
/* releases an op's n temporaries (NULL entries skipped), at its end */
static inline void ag_release_all(int n, lab_tensor *const *ts) {
  for (int i = 0; i < n; i++) lab_tensor_release(ts[i]);
}
/* The node's op context as the op's struct T: `const xent_ctx *c = AG_CTX(n, xent_ctx);`.
 * A T larger than the node's room fails the build (an array of negative size). */
#define AG_CTX(n, T) ((T *)((n)->op_ctx.bytes + 0 * sizeof(char[sizeof(T) <= LAB_NODE_CTX_BYTES ? 1 : -1])))

/* A shape recorded for backward (an input's, to sum a broadcast gradient back to it). */
typedef struct {
  int ndim;
  int64_t dims[LAB_MAX_DIMS];
} ag_shape;
ag_shape ag_shape_of(const lab_tensor *t);
/* r converted to dtype (consumes r) */
lab_tensor *ag_cast(lab_tensor *r, int dtype);
/* r summed to the input's shape and cast to its dtype (consumes r) */
lab_tensor *ag_to_input(lab_node *n, int i, lab_tensor *r, const ag_shape *shape);
/* (x op other) or, with other NULL, (x op scalar); consumes x */
lab_tensor *ag_chain(lab_tensor *x, lab_binary_op op, lab_tensor *other, double scalar);
/* x op scalar, x kept */
lab_tensor *ag_scalar_op(lab_tensor *x, lab_binary_op op, double scalar);
/* sign(x) = (x > 0) - (x < 0), in x's dtype */
lab_tensor *ag_sign(lab_tensor *x);
/* scalar - x */
lab_tensor *ag_scalar_rsub(double scalar, lab_tensor *x);

#endif
