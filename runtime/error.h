/* Errors in the runtime: a failing function records a message naming the op and the values
 * and returns NULL or -1; the Lua layer turns the message into a Lua error with the rank. */
#ifndef LAB_RUNTIME_ERROR_H
#define LAB_RUNTIME_ERROR_H

#if defined(__GNUC__)
#define LAB_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LAB_PRINTF(a, b)
#endif

/* Records "op: message"; always returns -1 so callers can `return lab_fail(...)`. */
int lab_fail(const char *op, const char *fmt, ...) LAB_PRINTF(2, 3);
const char *lab_last_error(void);
void lab_clear_error(void);

#endif
