/* JSON parsing: a recursive-descent parser over (pointer, end) that never reads past end. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

typedef struct {
  const char *start, *p, *end;
  char *err;
  size_t errlen;
} parser;

static int fail(parser *ps, const char *fmt, ...) {
  if (ps->err && ps->errlen) {
    int n = snprintf(ps->err, ps->errlen, "at byte %zu: ", (size_t)(ps->p - ps->start));
    if (n < 0 || (size_t)n >= ps->errlen) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static void skip_ws(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int literal(parser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return fail(ps, "unexpected token");
  ps->p += n;
  return 0;
}

static int hex4(parser *ps, unsigned *out) {
  if (ps->end - ps->p < 4) return fail(ps, "truncated \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = ps->p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return fail(ps, "bad \\u escape");
  }
  ps->p += 4;
  *out = v;
  return 0;
}

static void put_utf8(lab_strbuf *s, unsigned cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) { u[0] = (char)cp; n = 1; }
  else if (cp < 0x800) { u[0] = (char)(0xc0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
  else if (cp < 0x10000) {
    u[0] = (char)(0xe0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[2] = (char)(0x80 | (cp & 0x3f)); n = 3;
  } else {
    u[0] = (char)(0xf0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[3] = (char)(0x80 | (cp & 0x3f)); n = 4;
  }
  lab_strbuf_add(s, u, n);
}

/* a string after its opening quote; the decoded bytes in *out (malloc'd) */
static int parse_string(parser *ps, char **out, size_t *len) {
  lab_strbuf s = {0}; /* out of memory is checked once, at the end */
  lab_strbuf_add(&s, "", 0);
  for (;;) {
    if (ps->p >= ps->end) { free(s.b); return fail(ps, "unterminated string"); }
    unsigned char c = (unsigned char)*ps->p;
    if (c == '"') { ps->p++; break; }
    if (c < 0x20) { free(s.b); return fail(ps, "control character in a string"); }
    if (c != '\\') {
      const char *run = ps->p;
      while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' && (unsigned char)*ps->p >= 0x20) ps->p++;
      lab_strbuf_add(&s, run, (size_t)(ps->p - run));
      continue;
    }
    ps->p++;
    if (ps->p >= ps->end) { free(s.b); return fail(ps, "unterminated escape"); }
    char e = *ps->p++;
    const char *simple = NULL;
    switch (e) {
    case '"': simple = "\""; break;
    case '\\': simple = "\\"; break;
    case '/': simple = "/"; break;
    case 'b': simple = "\b"; break;
    case 'f': simple = "\f"; break;
    case 'n': simple = "\n"; break;
    case 'r': simple = "\r"; break;
    case 't': simple = "\t"; break;
    case 'u': {
      unsigned cp;
      if (hex4(ps, &cp) != 0) { free(s.b); return -1; }
      if (cp >= 0xdc00 && cp <= 0xdfff) { free(s.b); return fail(ps, "lone low surrogate"); }
      if (cp >= 0xd800 && cp <= 0xdbff) {
        unsigned lo;
        if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') { free(s.b); return fail(ps, "lone high surrogate"); }
        ps->p += 2;
        if (hex4(ps, &lo) != 0) { free(s.b); return -1; }
        if (lo < 0xdc00 || lo > 0xdfff) { free(s.b); return fail(ps, "bad surrogate pair"); }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      }
      if (cp == 0) { free(s.b); return fail(ps, "\\u0000 in a string"); }
      put_utf8(&s, cp);
      continue;
    }
    default: free(s.b); return fail(ps, "bad escape \\%c", e);
    }
    lab_strbuf_add(&s, simple, 1);
  }
  if (s.oom) {
    free(s.b);
    return fail(ps, "out of memory");
  }
  char *fit = realloc(s.b, s.n + 1); /* a parsed header keeps every string: no spare room */
  *out = fit ? fit : s.b;
  *len = s.n;
  return 0;
}

static int parse_number(parser *ps, lab_json *v) {
  const char *s = ps->p;
  const char *q = s;
  int is_int = 1;
  if (q < ps->end && *q == '-') q++;
  if (q >= ps->end) return fail(ps, "bad number");
  if (*q == '0') q++;
  else if (*q >= '1' && *q <= '9') while (q < ps->end && *q >= '0' && *q <= '9') q++;
  else return fail(ps, "bad number");
  if (q < ps->end && *q == '.') {
    is_int = 0;
    q++;
    if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, "bad number");
    while (q < ps->end && *q >= '0' && *q <= '9') q++;
  }
  if (q < ps->end && (*q == 'e' || *q == 'E')) {
    is_int = 0;
    q++;
    if (q < ps->end && (*q == '+' || *q == '-')) q++;
    if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, "bad number");
    while (q < ps->end && *q >= '0' && *q <= '9') q++;
  }
  char tok[64];
  size_t n = (size_t)(q - s);
  if (n >= sizeof tok) return fail(ps, "number longer than %zu characters", sizeof tok - 1);
  memcpy(tok, s, n);
  tok[n] = 0;
  errno = 0;
  if (is_int) {
    char *endp;
    long long x = strtoll(tok, &endp, 10);
    if (errno == ERANGE) return fail(ps, "integer %s out of the 64-bit range", tok);
    v->kind = LAB_JSON_INT;
    v->integer = x;
    v->number = (double)x;
  } else {
    char *endp;
    double x = strtod(tok, &endp);
    if (*endp != 0 || !isfinite(x)) return fail(ps, "number %s is not a finite double", tok);
    v->kind = LAB_JSON_NUMBER;
    v->number = x;
  }
  ps->p = q;
  return 0;
}

static int parse_value(parser *ps, lab_json *v, int depth);

static int grow(parser *ps, lab_json *v, size_t *cap, int with_keys) {
  if (v->len < *cap) return 0;
  size_t c = *cap ? *cap * 2 : 4;
  lab_json *items = realloc(v->items, c * sizeof *items);
  if (!items) return fail(ps, "out of memory");
  v->items = items;
  if (with_keys) {
    char **keys = realloc(v->keys, c * sizeof *keys);
    if (!keys) return fail(ps, "out of memory");
    v->keys = keys;
  }
  *cap = c;
  return 0;
}

/* after a container's opening bracket: 1 when it is empty (its close taken), else 0 */
static int empty_container(parser *ps, char close) {
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
    return 1;
  }
  return 0;
}

/* after an item of an array or object: 1 at its close, 0 at a comma (an item follows), -1 */
static int after_item(parser *ps, char close, const char *kind) {
  skip_ws(ps);
  if (ps->p >= ps->end) return fail(ps, "unterminated %s", kind);
  char c = *ps->p++;
  if (c == close) return 1;
  if (c != ',') {
    ps->p--;
    return fail(ps, "expected , or %c in an %s", close, kind);
  }
  return 0;
}

/* Members are kept sorted by key (JSON gives their order no meaning), so duplicates are
 * neighbours and lab_json_get is a binary search: a header of a million keys stays fast. */
typedef struct {
  char *key;
  lab_json item;
} member;

static int cmp_member(const void *a, const void *b) {
  return strcmp(((const member *)a)->key, ((const member *)b)->key);
}

static int sort_members(parser *ps, lab_json *v) {
  if (v->len < 2) return 0;
  member *m = malloc(v->len * sizeof *m);
  if (!m) return fail(ps, "out of memory");
  for (size_t i = 0; i < v->len; i++) {
    m[i].key = v->keys[i];
    m[i].item = v->items[i];
  }
  qsort(m, v->len, sizeof *m, cmp_member);
  for (size_t i = 0; i < v->len; i++) {
    v->keys[i] = m[i].key;
    v->items[i] = m[i].item;
  }
  free(m);
  for (size_t i = 1; i < v->len; i++)
    if (strcmp(v->keys[i - 1], v->keys[i]) == 0) return fail(ps, "duplicate key \"%.64s\"", v->keys[i]);
  return 0;
}

/* an object's key and its colon, after the comma or the opening brace */
static int parse_key(parser *ps, char **key) {
  skip_ws(ps);
  if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a key string");
  ps->p++;
  size_t klen;
  if (parse_string(ps, key, &klen) != 0) return -1;
  skip_ws(ps);
  if (ps->p >= ps->end || *ps->p != ':') {
    free(*key); /* not counted in v->len yet: lab_json_free would not see it */
    *key = NULL;
    return fail(ps, "expected : after a key");
  }
  ps->p++;
  return 0;
}

/* an array or (object = 1) an object, after its opening bracket: items appended to v (with
 * their keys), an object's members then sorted */
static int parse_container(parser *ps, lab_json *v, int depth, int object) {
  size_t cap = 0;
  char close = object ? '}' : ']';
  v->kind = object ? LAB_JSON_OBJECT : LAB_JSON_ARRAY;
  if (empty_container(ps, close)) return 0;
  for (;;) {
    if (grow(ps, v, &cap, object) != 0) return -1;
    memset(&v->items[v->len], 0, sizeof v->items[0]);
    if (object && parse_key(ps, &v->keys[v->len]) != 0) return -1;
    v->len++;
    if (parse_value(ps, &v->items[v->len - 1], depth + 1) != 0) return -1;
    int end = after_item(ps, close, object ? "object" : "array");
    if (end != 0) return end < 0 ? -1 : object ? sort_members(ps, v) : 0;
  }
}

static int parse_value(parser *ps, lab_json *v, int depth) {
  if (depth > LAB_JSON_MAX_DEPTH) return fail(ps, "nested deeper than %d", LAB_JSON_MAX_DEPTH);
  skip_ws(ps);
  if (ps->p >= ps->end) return fail(ps, "unexpected end of input");
  switch (*ps->p) {
  case '{': ps->p++; return parse_container(ps, v, depth, 1);
  case '[': ps->p++; return parse_container(ps, v, depth, 0);
  case '"':
    ps->p++;
    v->kind = LAB_JSON_STRING;
    return parse_string(ps, &v->str, &v->len);
  case 't': v->kind = LAB_JSON_BOOL; v->boolean = 1; return literal(ps, "true");
  case 'f': v->kind = LAB_JSON_BOOL; v->boolean = 0; return literal(ps, "false");
  case 'n': v->kind = LAB_JSON_NULL; return literal(ps, "null");
  default: return parse_number(ps, v);
  }
}

void lab_json_free(lab_json *v) {
  if (!v) return;
  if (v->kind == LAB_JSON_ARRAY || v->kind == LAB_JSON_OBJECT) {
    for (size_t i = 0; i < v->len; i++) {
      lab_json_free(&v->items[i]);
      if (v->keys) free(v->keys[i]);
    }
  }
  free(v->items);
  free(v->keys);
  free(v->str);
  memset(v, 0, sizeof *v);
}

int lab_json_parse(const char *text, size_t n, lab_json *out, char *err, size_t errlen) {
  parser ps = {text, text, text + n, err, errlen};
  memset(out, 0, sizeof *out);
  if (!text && n) return fail(&ps, "no input");
  int rc = parse_value(&ps, out, 0);
  if (rc == 0) {
    skip_ws(&ps);
    if (ps.p != ps.end) rc = fail(&ps, "trailing bytes after the value");
  }
  if (rc != 0) lab_json_free(out);
  return rc;
}

const lab_json *lab_json_get(const lab_json *obj, const char *key) {
  if (!obj || obj->kind != LAB_JSON_OBJECT) return NULL;
  size_t lo = 0, hi = obj->len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(obj->keys[mid], key);
    if (c == 0) return &obj->items[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}
