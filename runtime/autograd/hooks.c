/* Gradient hooks: user functions that see, or replace, a gradient on its way through the
 * backward pass (on a node's output or a leaf), or see a leaf's .grad once it is accumulated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "hooks.h"

static int next_hook_id = 1;

void ag_free_hooks(lab_hook *h) {
  while (h) {
    lab_hook *next = h->next;
    if (h->free_ctx) h->free_ctx(h->ctx);
    free(h);
    h = next;
  }
}

lab_hook *ag_append_hook(lab_hook **list, lab_hook_fn fn, void *ctx, void (*free_ctx)(void *), const char *op) {
  lab_hook *h = calloc(1, sizeof *h);
  if (!h) {
    lab_fail(op, "out of memory");
    return NULL;
  }
  h->fn = fn;
  h->ctx = ctx;
  h->free_ctx = free_ctx;
  while (*list) list = &(*list)->next;
  *list = h;
  return h;
}

int lab_register_hook(lab_tensor *t, lab_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
  if (!lab_requires_grad(t))
    return lab_fail("register_hook", "cannot register a hook on a tensor that does not require grad");
  lab_hook *h = ag_append_hook(t->ag->grad_fn ? &t->ag->grad_fn->hooks : &t->ag->hooks, fn, ctx, free_ctx,
                               "register_hook");
  return h ? (h->id = next_hook_id++) : -1;
}

int lab_register_post_accumulate_hook(lab_tensor *t, lab_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
  if (!lab_requires_grad(t) || !lab_is_leaf(t))
    return lab_fail("register_post_accumulate_grad_hook", "only leaf tensors that require grad accumulate gradients");
  lab_hook *h = ag_append_hook(&t->ag->post_hooks, fn, ctx, free_ctx, "register_post_accumulate_grad_hook");
  return h ? (h->id = next_hook_id++) : -1;
}

int lab_remove_hook(lab_tensor *t, int id) {
  if (!t->ag) return 0;
  lab_hook **lists[3] = {&t->ag->hooks, t->ag->grad_fn ? &t->ag->grad_fn->hooks : NULL, &t->ag->post_hooks};
  for (int k = 0; k < 3; k++) {
    if (!lists[k]) continue;
    for (lab_hook **p = lists[k]; *p; p = &(*p)->next)
      if ((*p)->id == id) {
        lab_hook *h = *p;
        *p = h->next;
        if (h->free_ctx) h->free_ctx(h->ctx);
        free(h);
        return 1;
      }
  }
  return 0;
}

/* A gradient entering the engine from user code (a hook's replacement, an
 * autograd.Function's backward) must fit what it flows into: the kernels downstream trust
 * shapes (a hook returning ones(1) on a layer_norm output overflowed a heap buffer). The
 * shape and device must be the input's; the dtype floating point (the engine keeps a
 * gradient's float type; a leaf's .grad is stored in the leaf's dtype). `who` says where
 * the gradient came from: "hook on layer_norm", "Function backward (input 2)". */
int ag_check_grad(const char *who, const lab_tensor *g, int ndim, const int64_t *shape, lab_device dev) {
  char a[128], b[128];
  if (g->ndim != ndim || memcmp(g->shape, shape, sizeof(int64_t) * (size_t)ndim) != 0)
    return lab_fail("backward", "%s returned a gradient of shape %s, expected %s", who, lab_shape_str(g, a, sizeof a),
                    lab_dims_str(ndim, shape, b, sizeof b));
  if (!lab_dtype_is_float(g->dtype))
    return lab_fail("backward", "%s returned a gradient of dtype %s, expected a floating dtype", who,
                    lab_dtype_name(g->dtype));
  if (!lab_device_eq(lab_device_of(g), dev))
    return lab_fail("backward", "%s returned a gradient on %s, expected %s", who,
                    lab_device_str(lab_device_of(g), a, sizeof a), lab_device_str(dev, b, sizeof b));
  return 0;
}

/* Runs hooks on *g, replacing it with what they return; `on` names the tensor ("layer_norm":
 * the op that made it, or "a leaf"). */
int ag_run_hooks(lab_hook *h, lab_tensor **g, const char *on) {
  for (; h; h = h->next) {
    lab_tensor *rep = NULL;
    if (h->fn(h->ctx, *g, &rep) < 0) return -1;
    if (rep) {
      char who[96];
      snprintf(who, sizeof who, "hook on %s", on);
      if (ag_check_grad(who, rep, (*g)->ndim, (*g)->shape, lab_device_of(*g)) < 0) {
        lab_tensor_release(rep);
        return -1;
      }
      lab_tensor_release(*g);
      *g = rep;
    }
  }
  return 0;
}
