/* The file operations of a checkpoint save, each a numbered fault point: a file is written to
 * "<path>.tmp", fsynced, renamed into place and its directory fsynced, so a crash at any
 * instant leaves either the old file or the new one, never half of one. Tests arm a fault
 * point: at the k-th operation from then on the process either fails the operation (an error
 * the caller reports) or dies on the spot (_exit, as a crash or kill -9 would), which is how
 * the crash-safety tests visit every operation of a save. */
#ifndef LAB_RUNTIME_CKPT_IO_H
#define LAB_RUNTIME_CKPT_IO_H

#include <stddef.h>

typedef enum { LAB_FAULT_OFF = 0, LAB_FAULT_FAIL, LAB_FAULT_EXIT } lab_fault_mode;

/* Arms the fault at the k-th operation (1-based) counted from now; LAB_FAULT_OFF disarms. */
void lab_ckpt_fault_arm(int k, lab_fault_mode mode);
/* Operations counted since the last arm (also when disarmed). */
int lab_ckpt_fault_count(void);
/* the exit status of a process killed at a fault point */
#define LAB_FAULT_EXIT_STATUS 86

/* A piece of a file's contents. */
typedef struct {
  const void *data;
  size_t n;
} lab_io_piece;

/* Writes the pieces to path atomically (tmp, write, fsync, rename, fsync of the directory). */
int lab_ckpt_write_file(const char *path, const lab_io_piece *pieces, size_t npieces);
int lab_ckpt_mkdir(const char *path); /* one level; an existing directory is fine */
int lab_ckpt_rename(const char *from, const char *to); /* then fsyncs to's directory */
int lab_ckpt_fsync_dir(const char *path);
/* Removes a directory tree (or file); a missing path is fine. */
int lab_ckpt_remove_tree(const char *path);

/* Reads a whole file into a malloc'd buffer (at most max_bytes). Returns 0 or -1 (lab_fail). */
int lab_ckpt_read_file(const char *path, size_t max_bytes, unsigned char **out, size_t *n);

#endif
