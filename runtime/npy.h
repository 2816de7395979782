/* .npy files (NumPy format 1.0/2.0), so weights and reference values move between llmlab,
 * NumPy and PyTorch. Reading checks every field and size against the file; writing goes
 * to a temporary name and is renamed into place, so a crash never leaves half a file. */
#ifndef LAB_RUNTIME_NPY_H
#define LAB_RUNTIME_NPY_H

#include "tensor.h"

lab_tensor *lab_npy_load(const char *path);
/* bf16 has no NumPy type: it is written as f32 (exactly representable). */
int lab_npy_save(lab_tensor *t, const char *path);

#endif
