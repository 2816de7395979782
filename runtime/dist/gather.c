/* gather and scatter (dist.h), torch.distributed's: one root receives every rank's tensor, or
 * sends each rank its block. They are the worked example of adding a collective (docs/DESIGN.md,
 * "A collective"): this file, the list line and declarations in dist.h, the MPI call in
 * mpi_post.c (which recovery also posts, so a Ctrl-C during one is repairable) and the Lua
 * functions in lua/l_dist.c. NCCL has no gather or scatter: tensors of a GPU group run on host
 * copies. */
#include "../error.h"
#include "check.h"
#include "dist.h"
#include "stage.h"

/* The checks both share, on this rank's arguments alone (no message): the root holds the
 * tensor of size blocks (gather's output, scatter's input: root_has_out says which), present
 * there only, absent elsewhere; every rank holds its block. */
static int rooted_check(const char *op, lab_group *g, int root, int root_has_out, lab_tensor *out, lab_tensor *in) {
  if (lab_coll_member_check(op, g) < 0 || lab_coll_root_check(op, g, root, root_has_out ? "dst" : "src") < 0) return -1;
  int is_root = g->rank == root;
  lab_tensor *all = root_has_out ? out : in, *one = root_has_out ? in : out;
  const char *all_name = root_has_out ? "output" : "input", *one_name = root_has_out ? "input" : "output";
  if (is_root && !all)
    return lab_fail(op, "the root (rank %d of %s) needs the %s tensor of %d blocks", g->rank, g->name, all_name, g->size);
  if (!is_root && all)
    return lab_fail(op, "only the root passes the %s tensor: rank %d of %s is not the root", all_name, g->rank, g->name);
  return is_root ? lab_coll_sized_pair_check(op, g, all, all_name, one, one_name) : lab_coll_contiguous_check(op, one_name, one);
}

/* The checks, then the route: NCCL has neither call, so device tensors go through host copies. */
static int rooted_route(const char *op, lab_group *g, int root, int root_has_out, lab_tensor *out, lab_tensor *in,
                        lab_coll_path *path) {
  if (rooted_check(op, g, root, root_has_out, out, in) < 0) return -1;
  if (lab_coll_route(op, g, out, in, 0, path) < 0) return -1;
  if (*path == LAB_PATH_DEVICE) *path = LAB_PATH_STAGED;
  return 0;
}

int lab_gather_check(lab_group *g, lab_tensor *out, lab_tensor *in, int dst) {
  return rooted_check("gather", g, dst, 1, out, in);
}

int lab_scatter_check(lab_group *g, lab_tensor *out, lab_tensor *in, int src) {
  return rooted_check("scatter", g, src, 0, out, in);
}

/* gather(out: dst's only, in) */
static int gather(lab_group *g, lab_tensor *out, lab_tensor *in, const lab_coll_args *a, lab_work **work) {
  lab_coll_path path;
  if (rooted_route("gather", g, a->root, 1, out, in, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, out, in, 1, 0, gather, a, work);
  /* every rank but the root sends its input once */
  int is_root = g->rank == a->root;
  return lab_coll_run(g, path, in, -1, (int64_t)lab_nbytes(in), is_root ? 0.0 : 1.0, work, out, in, 0,
                      (lab_coll_call){LAB_OP_GATHER, NULL, lab_data(in), out ? lab_data(out) : NULL, lab_numel(in),
                                      in->dtype, -1, a->root, 0, {0}});
}

/* scatter(out, in: src's only) */
static int scatter(lab_group *g, lab_tensor *out, lab_tensor *in, const lab_coll_args *a, lab_work **work) {
  lab_coll_path path;
  if (rooted_route("scatter", g, a->root, 0, out, in, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, out, in, 1, 0, scatter, a, work);
  /* the root sends every block but its own */
  int is_root = g->rank == a->root;
  return lab_coll_run(g, path, out, -1, (int64_t)lab_nbytes(out), is_root ? g->size - 1.0 : 0.0, work, out, in, 0,
                      (lab_coll_call){LAB_OP_SCATTER, NULL, in ? lab_data(in) : NULL, lab_data(out), lab_numel(out),
                                      out->dtype, -1, a->root, 0, {0}});
}

int lab_gather(lab_group *g, lab_tensor *out, lab_tensor *in, int dst, lab_work **work) {
  return gather(g, out, in, &(lab_coll_args){.root = dst}, work);
}

int lab_scatter(lab_group *g, lab_tensor *out, lab_tensor *in, int src, lab_work **work) {
  return scatter(g, out, in, &(lab_coll_args){.root = src}, work);
}
