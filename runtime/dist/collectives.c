/* The collectives of dist.h (all_to_all_single is in a2a.c). Each is one function over
 * (t, u, args) that checks its arguments (check.h), takes its route (stage.h: on host copies it runs itself again), shows the
 * fingerprint in checked mode, counts its traffic, and launches its backend call (work.h). */
#include "dist.h"

#include "../error.h"
#include "check.h"
#include "stage.h"
#include "work.h"

/* the root's average: sum on the wire, then divide where the result lands */
static int bop(lab_redop op) { return op == LAB_RED_AVG ? LAB_RED_SUM : op; }

/* all_reduce(t): t in place */
static int all_reduce(lab_group *g, lab_tensor *t, lab_tensor *u, const lab_coll_args *a, lab_work **work) {
  (void)u;
  const char *name = "all_reduce";
  if (lab_coll_member_check(name, g) < 0 || lab_coll_contiguous_check(name, "the", t) < 0 ||
      lab_coll_redop_check(name, t, a->op) < 0)
    return -1;
  lab_coll_path path;
  if (lab_coll_route(name, g, t, NULL, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, t, NULL, 1, 0, all_reduce, a, work);
  return lab_coll_run(g, path, t, a->op, (int64_t)lab_nbytes(t), 2 * lab_coll_ring(g), work, t, NULL,
                      a->op == LAB_RED_AVG ? g->size : 0,
                      (lab_coll_call){LAB_OP_ALL_REDUCE, NULL, lab_data(t), lab_data(t), lab_numel(t), t->dtype,
                                      bop(a->op), -1, 0, {0}});
}

/* broadcast(t) from a->root */
static int broadcast(lab_group *g, lab_tensor *t, lab_tensor *u, const lab_coll_args *a, lab_work **work) {
  (void)u;
  const char *name = "broadcast";
  if (lab_coll_member_check(name, g) < 0 || lab_coll_contiguous_check(name, "the", t) < 0 ||
      lab_coll_root_check(name, g, a->root, "src") < 0)
    return -1;
  lab_coll_path path;
  if (lab_coll_route(name, g, t, NULL, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, t, NULL, 1, 0, broadcast, a, work);
  return lab_coll_run(g, path, t, -1, (int64_t)lab_nbytes(t), g->size > 1 ? 1.0 : 0.0, work, t, NULL, 0,
                      (lab_coll_call){LAB_OP_BROADCAST, NULL, lab_data(t), lab_data(t), lab_numel(t), t->dtype, -1,
                                      a->root, 0, {0}});
}

/* reduce(t) into a->root's t (the others' t are left as MPI leaves them: unchanged) */
static int reduce(lab_group *g, lab_tensor *t, lab_tensor *u, const lab_coll_args *a, lab_work **work) {
  (void)u;
  const char *name = "reduce";
  if (lab_coll_member_check(name, g) < 0 || lab_coll_contiguous_check(name, "the", t) < 0 ||
      lab_coll_root_check(name, g, a->root, "dst") < 0 || lab_coll_redop_check(name, t, a->op) < 0)
    return -1;
  lab_coll_path path;
  if (lab_coll_route(name, g, t, NULL, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, t, NULL, 1, 0, reduce, a, work);
  int avg = (a->op == LAB_RED_AVG && g->rank == a->root) ? g->size : 0;
  return lab_coll_run(g, path, t, a->op, (int64_t)lab_nbytes(t), g->size > 1 ? 1.0 : 0.0, work, t, NULL, avg,
                      (lab_coll_call){LAB_OP_REDUCE, NULL, lab_data(t), lab_data(t), lab_numel(t), t->dtype,
                                      bop(a->op), a->root, 0, {0}});
}

/* all_gather(out, in) */
static int all_gather(lab_group *g, lab_tensor *out, lab_tensor *in, const lab_coll_args *a, lab_work **work) {
  const char *name = "all_gather";
  if (lab_coll_member_check(name, g) < 0 || lab_coll_sized_pair_check(name, g, out, "output", in, "input") < 0)
    return -1;
  lab_coll_path path;
  if (lab_coll_route(name, g, out, in, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, out, in, 1, 0, all_gather, a, work);
  return lab_coll_run(g, path, in, -1, (int64_t)lab_nbytes(out), lab_coll_ring(g), work, out, in, 0,
                      (lab_coll_call){LAB_OP_ALL_GATHER, NULL, lab_data(in), lab_data(out), lab_numel(in), in->dtype,
                                      -1, -1, 0, {0}});
}

/* reduce_scatter(out, in) */
static int reduce_scatter(lab_group *g, lab_tensor *out, lab_tensor *in, const lab_coll_args *a, lab_work **work) {
  const char *name = "reduce_scatter";
  if (lab_coll_member_check(name, g) < 0 || lab_coll_sized_pair_check(name, g, in, "input", out, "output") < 0 ||
      lab_coll_redop_check(name, out, a->op) < 0)
    return -1;
  lab_coll_path path;
  if (lab_coll_route(name, g, out, in, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, out, in, 1, 0, reduce_scatter, a, work);
  return lab_coll_run(g, path, out, a->op, (int64_t)lab_nbytes(in), lab_coll_ring(g), work, out, in,
                      a->op == LAB_RED_AVG ? g->size : 0,
                      (lab_coll_call){LAB_OP_REDUCE_SCATTER, NULL, lab_data(in), lab_data(out), lab_numel(out),
                                      in->dtype, bop(a->op), -1, 0, {0}});
}

/* all_to_all(out, in) */
static int all_to_all(lab_group *g, lab_tensor *out, lab_tensor *in, const lab_coll_args *a, lab_work **work) {
  const char *name = "all_to_all";
  char s[128], t[128];
  if (lab_coll_member_check(name, g) < 0) return -1;
  lab_coll_path path;
  if (lab_coll_route(name, g, out, in, 0, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, out, in, 1, 0, all_to_all, a, work);
  if (in->dtype != out->dtype || lab_numel(in) != lab_numel(out))
    return lab_fail(name, "output %s %s and input %s %s must have the same dtype and size",
                    lab_shape_str(out, s, sizeof s), lab_dtype_name(out->dtype), lab_shape_str(in, t, sizeof t),
                    lab_dtype_name(in->dtype));
  if (lab_numel(in) % g->size != 0)
    return lab_fail(name, "input of %lld elements does not split evenly over %d ranks", (long long)lab_numel(in), g->size);
  if (lab_coll_contiguous_check(name, "input", in) < 0 || lab_coll_contiguous_check(name, "output", out) < 0) return -1;
  return lab_coll_run(g, path, in, -1, (int64_t)lab_nbytes(in), lab_coll_ring(g), work, out, in, 0,
                      (lab_coll_call){LAB_OP_ALL_TO_ALL, NULL, lab_data(in), lab_data(out), lab_numel(in) / g->size,
                                      in->dtype, -1, -1, 0, {0}});
}

static int peer_check(const char *op, lab_group *g, int peer, const char *what, int tag) {
  if (lab_coll_root_check(op, g, peer, what) < 0) return -1;
  if (peer == g->rank) return lab_fail(op, "%s %d is this rank itself", what, peer);
  if (tag < 0 || tag > LAB_P2P_TAG_MAX) return lab_fail(op, "tag %d is out of range (0 to %d)", tag, LAB_P2P_TAG_MAX);
  return 0;
}

/* send (t: the message) and recv (u: where it lands) to or from a->root */
static int p2p(lab_group *g, lab_tensor *t, lab_tensor *u, const lab_coll_args *a, lab_work **work) {
  int is_send = t != NULL;
  const char *name = is_send ? "send" : "recv";
  lab_tensor *x = is_send ? t : u;
  if (lab_coll_member_check(name, g) < 0 || lab_coll_contiguous_check(name, "the", x) < 0 ||
      peer_check(name, g, a->root, is_send ? "dst" : "src", a->tag) < 0)
    return -1;
  lab_coll_path path;
  if (lab_coll_route(name, g, x, NULL, 1, &path) < 0) return -1;
  if (path == LAB_PATH_STAGED) return lab_coll_staged(g, t, u, 0, 1, p2p, a, work);
  /* fingerprints skip point-to-point calls (lab_coll_agree) */
  return lab_coll_run(g, path, x, -1, (int64_t)lab_nbytes(x), is_send ? 1.0 : 0.0, work, x, NULL, 0,
                      (lab_coll_call){is_send ? LAB_OP_SEND : LAB_OP_RECV, NULL, lab_data(x), lab_data(x), lab_numel(x),
                                      x->dtype, -1, a->root, a->tag, {0}});
}

int lab_all_reduce(lab_group *g, lab_tensor *t, lab_redop op, lab_work **work) {
  return all_reduce(g, t, NULL, &(lab_coll_args){.op = op}, work);
}
int lab_broadcast(lab_group *g, lab_tensor *t, int root, lab_work **work) {
  return broadcast(g, t, NULL, &(lab_coll_args){.root = root}, work);
}
int lab_reduce(lab_group *g, lab_tensor *t, lab_redop op, int root, lab_work **work) {
  return reduce(g, t, NULL, &(lab_coll_args){.op = op, .root = root}, work);
}
int lab_all_gather(lab_group *g, lab_tensor *out, lab_tensor *in, lab_work **work) {
  return all_gather(g, out, in, &(lab_coll_args){0}, work);
}
int lab_reduce_scatter(lab_group *g, lab_tensor *out, lab_tensor *in, lab_redop op, lab_work **work) {
  return reduce_scatter(g, out, in, &(lab_coll_args){.op = op}, work);
}
int lab_all_to_all(lab_group *g, lab_tensor *out, lab_tensor *in, lab_work **work) {
  return all_to_all(g, out, in, &(lab_coll_args){0}, work);
}
int lab_send(lab_group *g, lab_tensor *t, int dst, int tag, lab_work **work) {
  return p2p(g, t, NULL, &(lab_coll_args){.root = dst, .tag = tag}, work);
}
int lab_recv(lab_group *g, lab_tensor *t, int src, int tag, lab_work **work) {
  return p2p(g, NULL, t, &(lab_coll_args){.root = src, .tag = tag}, work);
}

int lab_barrier(lab_group *g) {
  if (lab_coll_member_check("barrier", g) < 0) return -1;
  return lab_coll_run(g, LAB_PATH_HOST, NULL, -1, 0, 0, NULL, NULL, NULL, 0,
                      (lab_coll_call){LAB_OP_BARRIER, NULL, NULL, NULL, 0, LAB_F32, -1, -1, 0, {0}});
}
