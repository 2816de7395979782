/* Checkpoint file operations with fault points; see ckpt_io.h. */
#define _DEFAULT_SOURCE
#include "ckpt_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

/* One save runs at a time (the async writer is joined before the next operation on the main
 * thread), so the counter needs no lock. */
static int fault_at, fault_count;
static lab_fault_mode fault_mode;

void lab_ckpt_fault_arm(int k, lab_fault_mode mode) {
  fault_at = k;
  fault_mode = mode;
  fault_count = 0;
}

int lab_ckpt_fault_count(void) { return fault_count; }

/* every operation passes here first */
static int point(const char *op, const char *path) {
  fault_count++;
  if (fault_mode == LAB_FAULT_OFF || fault_count != fault_at) return 0;
  if (fault_mode == LAB_FAULT_EXIT) {
    fprintf(stderr, "ckpt: crash point %d: %s %s\n", fault_count, op, path);
    fflush(stderr);
    _exit(LAB_FAULT_EXIT_STATUS);
  }
  fault_mode = LAB_FAULT_OFF;
  return lab_fail("ckpt", "injected failure at operation %d (%s %s)", fault_count, op, path);
}

static void parent_of(const char *path, char *out, size_t n) {
  snprintf(out, n, "%s", path);
  char *slash = strrchr(out, '/');
  if (!slash) snprintf(out, n, ".");
  else if (slash == out) out[1] = 0;
  else *slash = 0;
}

int lab_ckpt_fsync_dir(const char *path) {
  if (point("fsync directory", path) != 0) return -1;
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return lab_fail("ckpt", "cannot open directory %s: %s", path, strerror(errno));
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  if (rc != 0 && e != EINVAL) return lab_fail("ckpt", "cannot fsync directory %s: %s", path, strerror(e));
  return 0;
}

int lab_ckpt_write_file(const char *path, const lab_io_piece *pieces, size_t npieces) {
  char tmp[4200], dir[4200];
  if (strlen(path) > 4000) return lab_fail("ckpt", "path of %zu bytes is too long", strlen(path));
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (point("create", tmp) != 0) return -1;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return lab_fail("ckpt", "cannot create %s: %s", tmp, strerror(errno));
  for (size_t i = 0; i < npieces; i++) {
    /* two points per file: before any byte, and half-way through its pieces (a torn file) */
    if ((i == 0 || i == npieces / 2) && point(i == 0 ? "write" : "write (half written)", tmp) != 0) goto fail;
    const char *p = pieces[i].data;
    size_t left = pieces[i].n;
    while (left > 0) {
      ssize_t w = write(fd, p, left > (1u << 30) ? (1u << 30) : left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        lab_fail("ckpt", "cannot write %s: %s", tmp, w < 0 ? strerror(errno) : "no progress");
        goto fail;
      }
      p += w;
      left -= (size_t)w;
    }
  }
  if (point("fsync", tmp) != 0) goto fail;
  if (fsync(fd) != 0) {
    lab_fail("ckpt", "cannot fsync %s: %s", tmp, strerror(errno));
    goto fail;
  }
  if (close(fd) != 0) {
    fd = -1;
    lab_fail("ckpt", "cannot close %s: %s", tmp, strerror(errno));
    goto fail;
  }
  fd = -1;
  if (point("rename", path) != 0) goto fail;
  if (rename(tmp, path) != 0) {
    lab_fail("ckpt", "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    goto fail;
  }
  parent_of(path, dir, sizeof dir);
  return lab_ckpt_fsync_dir(dir);
fail:
  if (fd >= 0) close(fd);
  unlink(tmp);
  return -1;
}

int lab_ckpt_mkdir(const char *path) {
  if (point("mkdir", path) != 0) return -1;
  if (mkdir(path, 0755) != 0 && errno != EEXIST) return lab_fail("ckpt", "cannot create directory %s: %s", path, strerror(errno));
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return lab_fail("ckpt", "%s exists and is not a directory", path);
  char dir[4200];
  parent_of(path, dir, sizeof dir);
  return lab_ckpt_fsync_dir(dir);
}

int lab_ckpt_rename(const char *from, const char *to) {
  if (point("rename", to) != 0) return -1;
  if (rename(from, to) != 0) return lab_fail("ckpt", "cannot rename %s to %s: %s", from, to, strerror(errno));
  char dir[4200];
  parent_of(to, dir, sizeof dir);
  return lab_ckpt_fsync_dir(dir);
}

static int remove_rec(const char *path, int depth) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : lab_fail("ckpt", "cannot stat %s: %s", path, strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    if (depth > 8) return lab_fail("ckpt", "%s: refusing to remove a tree deeper than 8 levels", path);
    DIR *d = opendir(path);
    if (!d) return lab_fail("ckpt", "cannot open directory %s: %s", path, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char child[4200];
      if ((size_t)snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= sizeof child) {
        rc = lab_fail("ckpt", "path too long under %s", path);
        break;
      }
      rc = remove_rec(child, depth + 1);
    }
    closedir(d);
    if (rc != 0) return rc;
    if (rmdir(path) != 0) return lab_fail("ckpt", "cannot remove %s: %s", path, strerror(errno));
    return 0;
  }
  if (unlink(path) != 0) return lab_fail("ckpt", "cannot remove %s: %s", path, strerror(errno));
  return 0;
}

int lab_ckpt_remove_tree(const char *path) {
  if (point("remove", path) != 0) return -1;
  return remove_rec(path, 0);
}

int lab_ckpt_read_file(const char *path, size_t max_bytes, unsigned char **out, size_t *n) {
  *out = NULL;
  *n = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return lab_fail("ckpt", "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return lab_fail("ckpt", "%s is not a regular file", path);
  }
  if ((uint64_t)st.st_size > max_bytes) {
    close(fd);
    return lab_fail("ckpt", "%s has %lld bytes, more than the %zu allowed", path, (long long)st.st_size, max_bytes);
  }
  size_t size = (size_t)st.st_size;
  unsigned char *b = malloc(size ? size : 1);
  if (!b) {
    close(fd);
    return lab_fail("ckpt", "out of memory reading %s (%zu bytes)", path, size);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, b + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      free(b);
      close(fd);
      return lab_fail("ckpt", "cannot read %s: %s", path, r < 0 ? strerror(errno) : "file shrank");
    }
    got += (size_t)r;
  }
  close(fd);
  *out = b;
  *n = size;
  return 0;
}
