/* The backward pass: Kahn's algorithm over the nodes reachable from the root, so each node
 * runs once, after every node that feeds it gradient; a leaf's gradient accumulates in .grad. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "../ewise.h"
#include "anomaly.h"
#include "graph.h"
#include "hooks.h"

/* the queue of end-of-backward callbacks; depth > 0 while a backward runs */
static lab_hook *end_queue;
static int backward_depth;

int lab_queue_backward_callback(lab_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
  if (backward_depth == 0) {
    if (free_ctx) free_ctx(ctx);
    return lab_fail("queue_callback", "no backward is running");
  }
  return ag_append_hook(&end_queue, fn, ctx, free_ctx, "queue_callback") ? 0 : -1;
}

/* Runs (and empties) the queue; callbacks may queue more, which also run. */
static int run_end_queue(int rc) {
  while (end_queue) {
    lab_hook *h = end_queue;
    end_queue = h->next;
    if (rc == 0 && h->fn(h->ctx, NULL, NULL) < 0) rc = -1;
    if (h->free_ctx) h->free_ctx(h->ctx);
    free(h);
  }
  return rc;
}

/* ---- gradients into nodes and leaves ---- */

/* dst += g, or dst = g when empty; g is consumed. */
static int accumulate(lab_tensor **dst, lab_tensor *g) {
  if (!*dst) {
    *dst = g;
    return 0;
  }
  int rc = lab_binary_(LAB_ADD, *dst, g);
  lab_tensor_release(g);
  return rc;
}

static int run_post_hooks(lab_tensor *leaf) {
  for (lab_hook *h = leaf->ag->post_hooks; h; h = h->next)
    if (h->fn(h->ctx, leaf->ag->grad, NULL) < 0) return -1;
  return 0;
}

/* Stores into a leaf's .grad: a private contiguous tensor of the leaf's dtype and shape. */
static int accumulate_leaf(lab_tensor *leaf, lab_tensor *g) {
  if (ag_run_hooks(leaf->ag->hooks, &g, "a leaf tensor") < 0) {
    lab_tensor_release(g);
    return -1;
  }
  lab_ag_meta *m = leaf->ag;
  if (m->grad) {
    int rc = lab_binary_(LAB_ADD, m->grad, g);
    lab_tensor_release(g);
    return rc;
  }
  lab_tensor *own;
  if (g->refcount == 1 && lab_is_contiguous(g) && g->dtype == leaf->dtype && !g->ag &&
      lab_same_shape(g, leaf) && g->offset == 0) {
    own = g;
  } else {
    own = lab_tensor_empty_on(lab_device_of(leaf), leaf->dtype, leaf->ndim, leaf->shape);
    if (own && lab_copy_(own, g) < 0) {
      lab_tensor_release(own);
      own = NULL;
    }
    lab_tensor_release(g);
    if (!own) return -1;
  }
  lab_storage_set_tag(own->storage, LAB_MEM_GRAD);
  m->grad = own;
  return 0;
}

/* One of the backward's edges into this leaf has delivered (or had nothing to deliver).
 * A leaf used several times (a tied weight) gets its post-accumulate hooks once, after its
 * last contribution, as PyTorch's AccumulateGrad does: DDP and ZeRO must not reduce a
 * gradient that is still growing. */
static int leaf_delivered(lab_tensor *leaf) {
  if (--leaf->ag->pending_uses > 0 || !leaf->ag->grad) return 0;
  return run_post_hooks(leaf);
}

/* ---- backward ---- */

/* a growable array of the nodes (or leaves) a backward visits */
typedef struct {
  void **items;
  int n, cap;
} ptr_list;

static int push(ptr_list *l, void *p) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 64;
    void **items = realloc(l->items, sizeof *items * (size_t)cap);
    if (!items) return lab_fail("backward", "out of memory");
    l->items = items;
    l->cap = cap;
  }
  l->items[l->n++] = p;
  return 0;
}

static int backward_pass(lab_tensor *root, lab_tensor *grad, int retain_graph);

int lab_backward(lab_tensor *root, lab_tensor *grad, int retain_graph) {
  backward_depth++;
  int rc = backward_pass(root, grad, retain_graph);
  backward_depth--;
  /* the outermost backward runs the queued callbacks (a failed one drops them) */
  if (backward_depth == 0) rc = run_end_queue(rc);
  return rc;
}

static int backward_pass(lab_tensor *root, lab_tensor *grad, int retain_graph) {
  char s[128];
  if (!lab_requires_grad(root))
    return lab_fail("backward", "the tensor does not require grad and has no grad_fn");
  if (!grad && lab_numel(root) != 1)
    return lab_fail("backward", "a gradient must be given for a non-scalar output of shape %s",
                    lab_shape_str(root, s, sizeof s));
  if (grad && !lab_same_shape(grad, root)) {
    char s2[128];
    return lab_fail("backward", "gradient of shape %s given for an output of shape %s",
                    lab_shape_str(grad, s2, sizeof s2), lab_shape_str(root, s, sizeof s));
  }
  lab_tensor *g0 = grad ? lab_to_dtype(grad, root->dtype) : lab_tensor_full_on(lab_device_of(root), root->dtype, root->ndim, root->shape, 1.0);
  if (!g0) return -1;
  if (!root->ag->grad_fn) {
    int rc = accumulate_leaf(root, g0);
    return rc < 0 ? rc : run_post_hooks(root);
  }

  /* 1. the reachable nodes and how many edges point at each */
  ptr_list all = {0}, stack = {0}, ready = {0}; /* of nodes */
  int rc = 0;
  lab_node *start = root->ag->grad_fn;
  start->seen = 1;
  start->deps = 0;
  if (push(&all, start) < 0 || push(&stack, start) < 0) rc = -1;
  ptr_list leaves = {0};
  while (rc == 0 && stack.n > 0) {
    lab_node *x = stack.items[--stack.n];
    for (int i = 0; i < x->nin; i++) {
      lab_tensor *leaf = x->next[i].leaf;
      if (leaf && leaf->ag->pending_uses++ == 0 && push(&leaves, leaf) < 0) rc = -1;
      lab_node *y = x->next[i].node;
      if (!y) continue;
      if (!y->seen) {
        y->seen = 1;
        y->deps = 0;
        if (push(&all, y) < 0 || push(&stack, y) < 0) rc = -1;
      }
      y->deps++;
    }
  }
  /* 2. run nodes as their gradients complete */
  start->pending = g0;
  g0 = NULL;
  if (rc == 0) rc = push(&ready, start);
  while (rc == 0 && ready.n > 0) {
    lab_node *x = ready.items[--ready.n];
    lab_tensor *gout = x->pending;
    x->pending = NULL;
    if (!gout) { /* no gradient reached this node: pass the news on to what it feeds */
      for (int i = 0; i < x->nin && rc == 0; i++) {
        if (x->next[i].leaf) rc = leaf_delivered(x->next[i].leaf);
        if (rc == 0 && x->next[i].node && --x->next[i].node->deps == 0) rc = push(&ready, x->next[i].node);
      }
      continue;
    }
    if (x->released) {
      lab_tensor_release(gout);
      rc = lab_fail("backward", "trying to backward through %s a second time: its saved tensors were "
                    "freed; pass {retain_graph=true} to the first backward", x->name);
      break;
    }
    if (ag_run_hooks(x->hooks, &gout, x->name) < 0) {
      lab_tensor_release(gout);
      rc = -1;
      break;
    }
    lab_tensor *stack_in[8] = {0};
    lab_tensor **gin = x->nin <= 8 ? stack_in : calloc((size_t)x->nin, sizeof *gin);
    if (!gin) {
      lab_tensor_release(gout);
      rc = lab_fail("backward", "out of memory");
      break;
    }
    rc = x->backward(x, gout, gin);
    lab_tensor_release(gout);
    if (ag_debugging && rc == 0) rc = ag_check_gradients(x, gin);
    for (int i = 0; i < x->nin; i++) {
      lab_edge *e = &x->next[i];
      lab_tensor *gi = gin[i];
      gin[i] = NULL;
      if (rc == 0 && gi && (e->leaf || e->node)) {
        char who[96];
        snprintf(who, sizeof who, "%s backward (input %d)", x->name, i + 1);
        rc = ag_check_grad(who, gi, e->ndim, e->shape, e->device);
      }
      if (rc == 0 && e->leaf) {
        if (gi) rc = accumulate_leaf(e->leaf, gi);
        if (rc == 0) rc = leaf_delivered(e->leaf);
      } else if (rc == 0 && gi && e->node) {
        rc = accumulate(&e->node->pending, gi);
      } else {
        lab_tensor_release(gi);
      }
      if (e->node && --e->node->deps == 0 && rc == 0) rc = push(&ready, e->node);
    }
    if (gin != stack_in) free(gin);
    if (!retain_graph) {
      ag_release_saved(x);
      x->released = 1;
    }
  }
  for (int i = 0; i < leaves.n; i++) ((lab_tensor *)leaves.items[i])->ag->pending_uses = 0;
  free(leaves.items);
  for (int i = 0; i < all.n; i++) {
    lab_node *x = all.items[i];
    x->seen = 0;
    lab_tensor_release(x->pending);
    x->pending = NULL;
  }
  free(all.items);
  free(stack.items);
  free(ready.items);
  return rc;
}
