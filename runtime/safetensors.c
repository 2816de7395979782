/* safetensors header parsing (checked against the file) and building. */
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "error.h"
#include "strbuf.h"

static const struct { const char *name; lab_dtype dt; } names[] = {
    {"F32", LAB_F32}, {"F64", LAB_F64}, {"I32", LAB_I32}, {"I64", LAB_I64},
    {"BF16", LAB_BF16}, {"F16", LAB_F16}, {"BOOL", LAB_BOOL}, {"F8_E4M3", LAB_F8E4M3}, {"F8_E5M2", LAB_F8E5M2},
};

const char *lab_st_dtype_name(lab_dtype t) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].dt == t) return names[i].name;
  return "?";
}

int lab_st_dtype_from_name(const char *name) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(names[i].name, name) == 0) return (int)names[i].dt;
  return -1;
}

void lab_st_header_free(lab_st_header *h) {
  if (!h) return;
  lab_json_free(&h->json);
  free(h->entries);
  memset(h, 0, sizeof *h);
}

static int cmp_begin(const void *a, const void *b) {
  const lab_st_entry *x = *(const lab_st_entry *const *)a, *y = *(const lab_st_entry *const *)b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* one tensor entry {dtype, shape, data_offsets} */
static int parse_entry(const char *what, const char *name, const lab_json *v, uint64_t data_len, lab_st_entry *e) {
  if (v->kind != LAB_JSON_OBJECT) return lab_fail("safetensors", "%s: entry \"%s\" is not an object", what, name);
  const lab_json *dt = lab_json_get(v, "dtype"), *shape = lab_json_get(v, "shape"),
                 *off = lab_json_get(v, "data_offsets");
  if (!dt || !shape || !off || v->len != 3)
    return lab_fail("safetensors", "%s: entry \"%s\" must have exactly dtype, shape and data_offsets", what, name);
  if (dt->kind != LAB_JSON_STRING || lab_st_dtype_from_name(dt->str) < 0)
    return lab_fail("safetensors", "%s: \"%s\" has dtype %s; llmlab reads F32, F64, BF16, F16, I32, I64, BOOL", what,
                    name, dt->kind == LAB_JSON_STRING ? dt->str : "(not a string)");
  e->name = name;
  e->dtype = (lab_dtype)lab_st_dtype_from_name(dt->str);
  if (shape->kind != LAB_JSON_ARRAY || shape->len > LAB_MAX_DIMS)
    return lab_fail("safetensors", "%s: \"%s\" has a shape that is not a list of at most %d sizes", what, name,
                    LAB_MAX_DIMS);
  e->ndim = (int)shape->len;
  uint64_t numel = 1;
  for (size_t d = 0; d < shape->len; d++) {
    const lab_json *s = &shape->items[d];
    if (s->kind != LAB_JSON_INT || s->integer < 0)
      return lab_fail("safetensors", "%s: \"%s\" has a shape entry that is not a size >= 0", what, name);
    e->shape[d] = s->integer;
    if (s->integer != 0 && numel > UINT64_MAX / 16 / (uint64_t)s->integer)
      return lab_fail("safetensors", "%s: \"%s\" has a shape whose size overflows", what, name);
    numel *= (uint64_t)s->integer;
  }
  if (off->kind != LAB_JSON_ARRAY || off->len != 2 || off->items[0].kind != LAB_JSON_INT ||
      off->items[1].kind != LAB_JSON_INT || off->items[0].integer < 0 || off->items[1].integer < off->items[0].integer)
    return lab_fail("safetensors", "%s: \"%s\" has data_offsets that are not [begin, end] with 0 <= begin <= end", what,
                    name);
  e->begin = (uint64_t)off->items[0].integer;
  e->end = (uint64_t)off->items[1].integer;
  if (e->end > data_len)
    return lab_fail("safetensors", "%s: \"%s\" ends at byte %llu of a data section of %llu bytes", what, name,
                    (unsigned long long)e->end, (unsigned long long)data_len);
  uint64_t want = numel * lab_dtype_size(e->dtype);
  if (e->end - e->begin != want)
    return lab_fail("safetensors", "%s: \"%s\" holds %llu bytes; shape and dtype %s need %llu", what, name,
                    (unsigned long long)(e->end - e->begin), dt->str, (unsigned long long)want);
  return 0;
}

int lab_st_parse(const unsigned char *bytes, size_t len, const char *what, lab_st_header *out) {
  memset(out, 0, sizeof *out);
  if (!what) what = "safetensors file";
  if (len < 8) return lab_fail("safetensors", "%s: %zu bytes, shorter than the 8-byte header length", what, len);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | bytes[i];
  if (n > LAB_ST_MAX_HEADER || n > len - 8)
    return lab_fail("safetensors", "%s: header length %llu does not fit a file of %zu bytes (limit %u)", what,
                    (unsigned long long)n, len, LAB_ST_MAX_HEADER);
  char err[256];
  if (lab_json_parse((const char *)bytes + 8, (size_t)n, &out->json, err, sizeof err) != 0)
    return lab_fail("safetensors", "%s: the header is not valid JSON (%s)", what, err);
  int rc = -1;
  lab_st_entry **order = NULL;
  const lab_json *j = &out->json;
  uint64_t data_len = (uint64_t)len - 8 - n;
  out->data_start = 8 + n;
  if (j->kind != LAB_JSON_OBJECT) {
    lab_fail("safetensors", "%s: the header is not a JSON object", what);
    goto done;
  }
  out->entries = calloc(j->len ? j->len : 1, sizeof *out->entries);
  order = calloc(j->len ? j->len : 1, sizeof *order);
  if (!out->entries || !order) {
    lab_fail("safetensors", "%s: out of memory", what);
    goto done;
  }
  for (size_t i = 0; i < j->len; i++) {
    if (strcmp(j->keys[i], "__metadata__") == 0) {
      const lab_json *m = &j->items[i];
      if (m->kind != LAB_JSON_OBJECT) {
        lab_fail("safetensors", "%s: __metadata__ is not an object", what);
        goto done;
      }
      for (size_t k = 0; k < m->len; k++)
        if (m->items[k].kind != LAB_JSON_STRING) {
          lab_fail("safetensors", "%s: __metadata__ value \"%s\" is not a string", what, m->keys[k]);
          goto done;
        }
      out->metadata = m;
      continue;
    }
    lab_st_entry *e = &out->entries[out->n];
    if (parse_entry(what, j->keys[i], &j->items[i], data_len, e) != 0) goto done;
    order[out->n++] = e;
  }
  /* the entries tile the data section: sorted by start, each begins where the last ended */
  qsort(order, out->n, sizeof *order, cmp_begin);
  uint64_t at = 0;
  for (size_t i = 0; i < out->n; i++) {
    if (order[i]->begin != at) {
      lab_fail("safetensors", "%s: \"%s\" starts at byte %llu; the data before it ends at %llu (%s)", what,
               order[i]->name, (unsigned long long)order[i]->begin, (unsigned long long)at,
               order[i]->begin < at ? "overlap" : "a hole");
      goto done;
    }
    at = order[i]->end;
  }
  if (at != data_len) {
    lab_fail("safetensors", "%s: %llu bytes of data after the last tensor", what, (unsigned long long)(data_len - at));
    goto done;
  }
  /* crc32 of each tensor, when the writer recorded one */
  for (size_t i = 0; out->metadata && i < out->n; i++) {
    char key[600];
    snprintf(key, sizeof key, "crc32:%s", out->entries[i].name);
    const lab_json *c = lab_json_get(out->metadata, key);
    if (!c) continue;
    char *endp;
    unsigned long v = strtoul(c->str, &endp, 16);
    if (c->len != 8 || *endp != 0) {
      lab_fail("safetensors", "%s: %s is not 8 hex digits", what, key);
      goto done;
    }
    out->entries[i].has_crc = 1;
    out->entries[i].crc = (uint32_t)v;
    uLong got = crc32_z(0L, bytes + out->data_start + out->entries[i].begin,
                        (size_t)(out->entries[i].end - out->entries[i].begin));
    if ((uint32_t)got != out->entries[i].crc) {
      lab_fail("safetensors", "%s: tensor \"%s\" fails its checksum (crc32 %08x, recorded %08x): the data is damaged",
               what, out->entries[i].name, (unsigned)got, (unsigned)out->entries[i].crc);
      goto done;
    }
  }
  rc = 0;
done:
  free(order);
  if (rc != 0) lab_st_header_free(out);
  return rc;
}

int lab_st_read_header_json(const char *path, lab_json *header) {
  memset(header, 0, sizeof *header);
  FILE *f = fopen(path, "rb");
  if (!f) return lab_fail("safetensors", "cannot open %s", path);
  unsigned char len8[8];
  int rc = -1;
  char *text = NULL;
  if (fread(len8, 1, 8, f) != 8) {
    lab_fail("safetensors", "%s: shorter than the 8-byte header length", path);
    goto done;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
  if (fseek(f, 0, SEEK_END) != 0) {
    lab_fail("safetensors", "%s: cannot seek", path);
    goto done;
  }
  long size = ftell(f);
  if (size < 8 || n > LAB_ST_MAX_HEADER || n > (uint64_t)size - 8) {
    lab_fail("safetensors", "%s: header length %llu does not fit a file of %ld bytes", path, (unsigned long long)n, size);
    goto done;
  }
  text = malloc(n ? n : 1);
  if (!text || fseek(f, 8, SEEK_SET) != 0 || fread(text, 1, n, f) != n) {
    lab_fail("safetensors", "%s: cannot read its header", path);
    goto done;
  }
  char err[256];
  if (lab_json_parse(text, n, header, err, sizeof err) != 0) {
    lab_fail("safetensors", "%s: the header is not valid JSON (%s)", path, err);
    goto done;
  }
  rc = 0;
done:
  free(text);
  fclose(f);
  return rc;
}

/* ---- writing ---- */

static void adds(lab_strbuf *s, const char *p) { lab_strbuf_add(s, p, strlen(p)); }

static void add_json_string(lab_strbuf *s, const char *p) {
  adds(s, "\"");
  for (; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      lab_strbuf_add(s, e, 2);
    } else if (c < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", c);
      adds(s, e);
    } else {
      lab_strbuf_add(s, (const char *)&c, 1);
    }
  }
  adds(s, "\"");
}

int lab_st_build_header(const lab_st_tensor *ts, size_t n, const char *const *meta_keys,
                        const char *const *meta_values, size_t nmeta, char **header, size_t *header_len) {
  lab_strbuf s = {0};
  char num[64];
  lab_strbuf_add(&s, "\0\0\0\0\0\0\0\0", 8); /* the length, filled in below */
  adds(&s, "{\"__metadata__\":{");
  for (size_t i = 0; i < nmeta; i++) {
    if (i) adds(&s, ",");
    add_json_string(&s, meta_keys[i]);
    adds(&s, ":");
    add_json_string(&s, meta_values[i]);
  }
  for (size_t i = 0; i < n; i++) {
    if (strlen(ts[i].name) > 500) {
      free(s.b);
      return lab_fail("safetensors", "tensor name of %zu bytes is too long (500 at most)", strlen(ts[i].name));
    }
    char key[600];
    snprintf(key, sizeof key, "crc32:%s", ts[i].name);
    if (nmeta || i) adds(&s, ",");
    add_json_string(&s, key);
    snprintf(num, sizeof num, ":\"%08x\"", (unsigned)(crc32_z(0L, ts[i].data, ts[i].nbytes) & 0xffffffffu));
    adds(&s, num);
  }
  adds(&s, "}");
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    adds(&s, ",");
    add_json_string(&s, ts[i].name);
    adds(&s, ":{\"dtype\":\"");
    adds(&s, lab_st_dtype_name(ts[i].dtype));
    adds(&s, "\",\"shape\":[");
    for (int d = 0; d < ts[i].ndim; d++) {
      snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)ts[i].shape[d]);
      adds(&s, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
             (unsigned long long)(at + ts[i].nbytes));
    adds(&s, num);
    at += ts[i].nbytes;
  }
  adds(&s, "}");
  while ((s.n - 8) % 8) adds(&s, " "); /* the data starts 8-byte aligned, as the reference writer pads */
  if (s.oom) {
    free(s.b);
    return lab_fail("safetensors", "out of memory building a header");
  }
  uint64_t len = s.n - 8;
  for (int i = 0; i < 8; i++) s.b[i] = (char)(len >> (8 * i) & 0xff);
  *header = s.b;
  *header_len = s.n;
  return 0;
}
