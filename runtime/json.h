/* A bounds-checked JSON parser (RFC 8259) for file headers and checkpoint indexes: data is
 * parsed, never executed. Every read is checked against the given length (the text need not
 * be NUL-terminated), nesting is limited, integers keep all 64 bits, duplicate keys and
 * trailing bytes are refused. Object members are sorted by key. Errors name the byte offset. */
#ifndef LAB_RUNTIME_JSON_H
#define LAB_RUNTIME_JSON_H

#include <stddef.h>
#include <stdint.h>

#define LAB_JSON_MAX_DEPTH 64

typedef enum {
  LAB_JSON_NULL,
  LAB_JSON_BOOL,
  LAB_JSON_INT,    /* a number written without fraction or exponent, fits int64 */
  LAB_JSON_NUMBER, /* any other number (finite double) */
  LAB_JSON_STRING,
  LAB_JSON_ARRAY,
  LAB_JSON_OBJECT
} lab_json_kind;

typedef struct lab_json {
  lab_json_kind kind;
  int boolean;
  int64_t integer;
  double number;
  char *str;       /* STRING: UTF-8, NUL-terminated (\u0000 is refused) */
  size_t len;      /* STRING: bytes; ARRAY/OBJECT: items */
  struct lab_json *items;
  char **keys;     /* OBJECT: one key per item */
} lab_json;

/* Parses n bytes at text into *out. Returns 0, or -1 with a message in err (and *out empty). */
int lab_json_parse(const char *text, size_t n, lab_json *out, char *err, size_t errlen);
void lab_json_free(lab_json *v);
/* The member named key of an object, or NULL. */
const lab_json *lab_json_get(const lab_json *obj, const char *key);

#endif
