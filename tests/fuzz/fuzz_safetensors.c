/* Parser fuzz target: a safetensors file (runtime/safetensors.c), header and offsets checked
 * against the whole file, as ckpt.load and import_hf read it. */
#include <stddef.h>
#include <stdint.h>

#include "runtime/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lab_st_header h;
  if (lab_st_parse(data, size, "fuzz input", &h) == 0) lab_st_header_free(&h);
  return 0;
}
