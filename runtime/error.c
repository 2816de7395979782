/* The last error message of this thread. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

int lab_fail(const char *op, const char *fmt, ...) {
  int n = snprintf(last_error, sizeof last_error, "%s: ", op);
  if (n < 0 || n >= (int)sizeof last_error) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

const char *lab_last_error(void) { return last_error[0] ? last_error : "unknown error"; }
void lab_clear_error(void) { last_error[0] = 0; }
