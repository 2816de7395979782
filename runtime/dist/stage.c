/* The route of a collective on device tensors and its staged run on host copies (stage.h). */
#include "stage.h"

#include "../transfer.h"
#include "check.h"
#include "work.h"

int lab_coll_route(const char *op, lab_group *g, lab_tensor *a, lab_tensor *b, int p2p, lab_coll_path *path) {
  lab_device da = a ? lab_device_of(a) : lab_device_of(b), db = b ? lab_device_of(b) : da;
  return lab_devcomm_route(op, g, da, db, p2p, path);
}

lab_group *lab_coll_backend_group(lab_group *g, lab_coll_path path) {
  return path == LAB_PATH_DEVICE ? lab_devcomm_group(g) : g;
}

int lab_coll_run(lab_group *g, lab_coll_path path, lab_tensor *shown, int fp_redop, int64_t bytes, double wire_factor,
                 lab_work **work, lab_tensor *k0, lab_tensor *k1, int avg, lab_coll_call c) {
  lab_coll_op op = (lab_coll_op)c.op;
  lab_coll_set_activity(lab_coll_name(op), shown, g);
  if (lab_coll_agree(g, op, c.dt, c.count, fp_redop, c.peer) < 0) return -1;
  lab_coll_count(g, op, bytes, wire_factor);
  lab_group *bg = lab_coll_backend_group(g, path);
  if (!bg) return -1;
  return lab_coll_launch(bg, work, k0, k1, avg, c);
}

int lab_coll_staged(lab_group *g, lab_tensor *t, lab_tensor *u, int writes_t, int writes_u, lab_coll_fn fn,
                    const lab_coll_args *a, lab_work **work) {
  lab_tensor *ht = t ? lab_to_host(t) : NULL, *hu = u && (ht || !t) ? lab_to_host(u) : NULL;
  writes_t = writes_t && t;
  writes_u = writes_u && u;
  lab_work *inner = NULL;
  int rc = ((t && !ht) || (u && !hu)) ? -1 : fn(g, ht, hu, a, work ? &inner : NULL);
  if (rc == 0 && work) {
    lab_work *w = lab_coll_work_wrap(g, inner, ht, hu, writes_t ? t : NULL, writes_u ? u : NULL);
    if (w) {
      *work = w;
      return 0; /* w holds the host copies */
    }
    lab_work_free(inner);
    rc = -1;
  }
  if (rc == 0 && writes_t) rc = lab_copy_(t, ht);
  if (rc == 0 && writes_u) rc = lab_copy_(u, hu);
  lab_tensor_release(ht);
  lab_tensor_release(hu);
  return rc;
}
