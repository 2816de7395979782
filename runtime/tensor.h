/* Tensors: a strided view (shape, strides in elements, offset) over refcounted storage.
 * Dimensions are 0-based in C; the Lua layer maps Lua's 1-based dims onto these.
 * Functions returning a tensor return a new reference, or NULL after lab_fail(). */
#ifndef LAB_RUNTIME_TENSOR_H
#define LAB_RUNTIME_TENSOR_H

#include <stdint.h>

#include "../kernels/dtype.h"
#include "../kernels/ops.h"
#include "size.h"
#include "storage.h"

struct lab_ag_meta; /* autograd state, runtime/autograd.h; NULL for plain tensors */

typedef struct lab_tensor {
  int refcount;
  lab_dtype dtype;
  int ndim;
  int64_t shape[LAB_MAX_DIMS];
  int64_t stride[LAB_MAX_DIMS];
  int64_t offset;
  lab_storage *storage;
  struct lab_ag_meta *ag;
} lab_tensor;

const char *lab_dtype_name(lab_dtype t);
/* Accepts f32/float32/float, f64/float64/double, i32/int32/int, i64/int64/long,
 * bf16/bfloat16, f16/float16/half, bool. Returns -1 for an unknown name. */
int lab_dtype_from_name(const char *name);
lab_dtype lab_promote(lab_dtype a, lab_dtype b);

/* creation: on the cpu, or on a device (_on); an op's result goes on its inputs' device */
lab_tensor *lab_tensor_empty(lab_dtype dt, int ndim, const int64_t *shape);
lab_tensor *lab_tensor_zeros(lab_dtype dt, int ndim, const int64_t *shape);
lab_tensor *lab_tensor_full(lab_dtype dt, int ndim, const int64_t *shape, double value);
lab_tensor *lab_tensor_scalar(lab_dtype dt, double value);
lab_tensor *lab_tensor_arange(lab_dtype dt, double start, double end, double step);
lab_tensor *lab_tensor_empty_on(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape);
lab_tensor *lab_tensor_zeros_on(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape);
lab_tensor *lab_tensor_full_on(lab_device dev, lab_dtype dt, int ndim, const int64_t *shape, double value);
void lab_tensor_retain(lab_tensor *t);
void lab_tensor_release(lab_tensor *t);
/* The autograd engine frees a tensor's autograd state through this hook (set once by the
 * engine, which sits above tensors). */
void lab_tensor_set_ag_free(void (*fn)(struct lab_ag_meta *));

static inline lab_device lab_device_of(const lab_tensor *t) { return t->storage->device; }

/* facts */
int64_t lab_numel(const lab_tensor *t);
int lab_is_contiguous(const lab_tensor *t);
/* Address of element 0, in the memory of the tensor's device: only the cpu's may be read by
 * host code; everything else goes through the device table or runtime/transfer.h. */
void *lab_data(const lab_tensor *t);
size_t lab_nbytes(const lab_tensor *t);
int lab_same_shape(const lab_tensor *a, const lab_tensor *b);
/* "[2, 3]" into buf; returns buf */
const char *lab_shape_str(const lab_tensor *t, char *buf, size_t n);
/* lab_dims_str (the same for a shape array) is in size.h */

/* views: share storage, no copy */
lab_tensor *lab_view(lab_tensor *t, int ndim, const int64_t *shape); /* one -1 allowed */
lab_tensor *lab_reshape(lab_tensor *t, int ndim, const int64_t *shape); /* copies if needed */
lab_tensor *lab_transpose(lab_tensor *t, int d0, int d1);
lab_tensor *lab_permute(lab_tensor *t, const int *dims);
lab_tensor *lab_narrow(lab_tensor *t, int dim, int64_t start, int64_t length);
lab_tensor *lab_select(lab_tensor *t, int dim, int64_t index);
lab_tensor *lab_expand(lab_tensor *t, int ndim, const int64_t *shape); /* -1 keeps a size */
lab_tensor *lab_unsqueeze(lab_tensor *t, int dim);
lab_tensor *lab_squeeze(lab_tensor *t, int dim); /* dim < 0: every size-1 dim */
lab_tensor *lab_contiguous(lab_tensor *t);       /* t itself (retained) when contiguous (copy.c) */
lab_tensor *lab_alias(lab_tensor *t);            /* a new header, same storage and layout */

/* copies (runtime/copy.c) */
int lab_copy_(lab_tensor *dst, lab_tensor *src); /* broadcasts src, converts dtype */
lab_tensor *lab_clone(lab_tensor *t);
lab_tensor *lab_to_dtype(lab_tensor *t, lab_dtype dt); /* t itself when already dt */

/* broadcasting */
int lab_broadcast_shapes(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                         int *nout, int64_t *out);

#endif
