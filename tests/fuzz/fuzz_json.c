/* Parser fuzz target: the checkpoint index's JSON (runtime/json.c). Any input must parse or
 * be refused, reading nothing outside the given bytes (the input is not NUL-terminated). */
#include <stddef.h>
#include <stdint.h>

#include "runtime/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lab_json v;
  char err[256];
  if (lab_json_parse((const char *)data, size, &v, err, sizeof err) == 0) {
    /* walk what was parsed: lookups on objects must stay inside it too */
    if (v.kind == LAB_JSON_OBJECT) {
      for (size_t i = 0; i < v.len; i++) (void)lab_json_get(&v, v.keys[i]);
      (void)lab_json_get(&v, "step");
    }
    lab_json_free(&v);
  }
  return 0;
}
