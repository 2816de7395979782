/* Text form of a tensor, as PyTorch prints it: nested brackets, one number format shared
 * by all shown values, long dims summarised with "...", then shape and dtype. */
#ifndef LAB_RUNTIME_FORMAT_H
#define LAB_RUNTIME_FORMAT_H

#include "tensor.h"

/* malloc'ed string; NULL when out of memory */
char *lab_format(const lab_tensor *t);

#endif
