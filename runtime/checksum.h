/* A cheap fingerprint of a tensor's bytes, to tell whether replicas of a parameter on several
 * ranks hold the same values without moving them (lab.replicas compares one integer per
 * parameter across the data-parallel group). Any change confined to one 8-byte word, a single
 * flipped bit included, always changes the result (see checksum.c). */
#ifndef LAB_RUNTIME_CHECKSUM_H
#define LAB_RUNTIME_CHECKSUM_H

#include <stdint.h>

#include "tensor.h"

/* The checksum of t's elements in row-major order (its dtype's bytes, its shape mixed in):
 * read in place for a contiguous cpu tensor, else through a host copy. 0 or -1 (lab_fail). */
int lab_checksum(lab_tensor *t, uint64_t *out);

#endif
