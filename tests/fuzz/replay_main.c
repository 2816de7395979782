/* A plain driver for the parser fuzz targets where libFuzzer is not available (gcc builds,
 * the sanitizer lane): runs every file of the given corpus directories through
 * LLVMFuzzerTestOneInput, then `rounds` deterministic mutations of each (byte flips, digit
 * insertions, truncations), so a gcc build still fuzzes a little.
 *   fuzz_<parser>_replay ROUNDS DIR... */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static unsigned char *read_file(const char *path, size_t *n) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  size_t cap = 1 << 16, len = 0;
  unsigned char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
    len += got;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(fp);
  *n = len;
  return buf;
}

/* one mutation of in[0..n) into out (room for n + 32 bytes); returns the new length */
static size_t mutate(const unsigned char *in, size_t n, unsigned char *out) {
  static const char *tokens[] = {"9", "-1", "99999999999999999999", "4611686018427387904", "\"", "{", "[", ",", "e999", "\\u0000"};
  memcpy(out, in, n);
  size_t at = n ? next() % n : 0;
  switch (next() % 4) {
  case 0: if (n) out[at] ^= (unsigned char)(1u << (next() % 8)); return n;
  case 1: return at; /* truncate */
  case 2: if (n) out[at] = (unsigned char)next(); return n;
  default: {
    const char *tok = tokens[next() % (sizeof tokens / sizeof tokens[0])];
    size_t tl = strlen(tok);
    memmove(out + at + tl, in + at, n - at);
    memcpy(out + at, tok, tl);
    return n + tl;
  }
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ROUNDS CORPUS_DIR...\n", argv[0]);
    return 2;
  }
  long rounds = atol(argv[1]);
  long files = 0, runs = 0;
  for (int a = 2; a < argc; a++) {
    DIR *d = opendir(argv[a]);
    if (!d) {
      fprintf(stderr, "%s: cannot open %s\n", argv[0], argv[a]);
      return 2;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
      size_t n;
      unsigned char *buf = read_file(path, &n);
      if (!buf) continue;
      files++;
      /* an exact-size copy, so reading one byte past the input is a sanitizer report */
      unsigned char *exact = malloc(n ? n : 1);
      memcpy(exact, buf, n);
      LLVMFuzzerTestOneInput(exact, n);
      free(exact);
      runs++;
      unsigned char *m = malloc(n + 64);
      for (long r = 0; r < rounds; r++) {
        size_t len = mutate(buf, n, m);
        unsigned char *x = malloc(len ? len : 1);
        memcpy(x, m, len);
        LLVMFuzzerTestOneInput(x, len);
        free(x);
        runs++;
      }
      free(m);
      free(buf);
    }
    closedir(d);
  }
  printf("%s: %ld corpus files, %ld inputs run\n", argv[0], files, runs);
  return files > 0 ? 0 : 1;
}
