/* The autograd engine: nodes, edges, hooks and the backward pass (Kahn's algorithm over
 * the nodes reachable from the root, so each node runs once, after every node that feeds
 * it gradient). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bits.h"
#include "../error.h"
#include "../ewise.h"
#include "../reduce.h"
#include "autograd.h"

static int grad_mode = 1;
static int next_hook_id = 1;

/* anomaly mode and the planted NaN: `debugging` is the one flag the hot paths test */
static int debugging;
static int anomaly_on;
static lab_anomaly_hooks anomaly;
static struct {
  char op[64];
  int armed, backward;
  lab_plant_fired fired;
  void *ctx;
} plant;

static void update_debugging(void) { debugging = anomaly_on || plant.armed; }

void lab_set_anomaly(const lab_anomaly_hooks *h) {
  anomaly_on = h != NULL;
  if (h) anomaly = *h;
  update_debugging();
}

int lab_anomaly_enabled(void) { return anomaly_on; }

int lab_plant_nan(const char *op, int backward, lab_plant_fired fired, void *ctx) {
  plant.armed = 0;
  if (op) {
    if (strlen(op) >= sizeof plant.op) return lab_fail("plant_nan", "op name '%.40s...' is too long", op);
    snprintf(plant.op, sizeof plant.op, "%s", op);
    plant.armed = 1;
    plant.backward = backward != 0;
    plant.fired = fired;
    plant.ctx = ctx;
  }
  update_debugging();
  return 0;
}

/* the planted NaN, when it is armed for this op and direction: poisons t, fires once */
static int maybe_plant(const char *op, int backward, lab_tensor *t) {
  if (!plant.armed || plant.backward != backward || strcmp(plant.op, op) != 0 || lab_numel(t) == 0) return 0;
  plant.armed = 0;
  update_debugging();
  if (lab_bits_poison(t, 0) < 0) return -1;
  if (plant.fired) plant.fired(plant.ctx, op, backward);
  return 0;
}

/* fails when t holds NaN or Inf: `what` says which tensor of which op */
static int check_finite(lab_node *n, lab_tensor *t, const char *what) {
  int64_t nan, inf;
  if (lab_bits_nonfinite(t, &nan, &inf) < 0) return -1;
  if (nan == 0 && inf == 0) return 0;
  return lab_fail("detect_anomaly", "%s produced %lld NaN and %lld Inf in %s (of %lld elements)\n"
                  "  its forward ran in: %s", n->name, (long long)nan, (long long)inf, what,
                  (long long)lab_numel(t), n->anomaly_where ? n->anomaly_where : "(unknown)");
}

int lab_grad_enabled(void) { return grad_mode; }
void lab_set_grad_enabled(int on) { grad_mode = on != 0; }

void lab_ag_meta_free(lab_ag_meta *m);

/* Tensors sit below autograd: they free this state through the hook set here, on the first
 * tensor that gets any. */
static lab_ag_meta *meta(lab_tensor *t) {
  if (!t->ag) {
    lab_tensor_set_ag_free(lab_ag_meta_free);
    t->ag = calloc(1, sizeof *t->ag);
  }
  return t->ag;
}

static void free_hooks(lab_hook *h) {
  while (h) {
    lab_hook *next = h->next;
    if (h->free_ctx) h->free_ctx(h->ctx);
    free(h);
    h = next;
  }
}

void lab_ag_meta_free(lab_ag_meta *m) {
  lab_tensor_release(m->grad);
  lab_node_release(m->grad_fn);
  free_hooks(m->hooks);
  free_hooks(m->post_hooks);
  free(m);
}

int lab_requires_grad(const lab_tensor *t) { return t->ag && t->ag->requires_grad; }
int lab_is_leaf(const lab_tensor *t) { return !t->ag || !t->ag->grad_fn; }
lab_tensor *lab_grad_of(const lab_tensor *t) { return t->ag ? t->ag->grad : NULL; }
const char *lab_grad_fn_name(const lab_tensor *t) { return t->ag && t->ag->grad_fn ? t->ag->grad_fn->name : NULL; }

void lab_set_grad(lab_tensor *t, lab_tensor *g) {
  lab_ag_meta *m = meta(t);
  if (!m) return;
  lab_tensor_release(m->grad);
  m->grad = g;
  if (g) lab_tensor_retain(g);
}

int lab_set_requires_grad(lab_tensor *t, int on) {
  if (!lab_is_leaf(t))
    return lab_fail("requires_grad_", "only leaf tensors can change requires_grad (this one comes from %s); "
                    "use detach() first", t->ag->grad_fn->name);
  if (on && !lab_dtype_is_float(t->dtype))
    return lab_fail("requires_grad_", "only floating-point tensors can require grad, this one is %s",
                    lab_dtype_name(t->dtype));
  lab_ag_meta *m = meta(t);
  if (!m) return lab_fail("requires_grad_", "out of memory");
  m->requires_grad = on != 0;
  return 0;
}

lab_tensor *lab_detach(lab_tensor *t) { return lab_alias(t); }

/* ---- recording ---- */

int lab_ag_needed(int n, lab_tensor *const *inputs) {
  if (!grad_mode) return 0;
  for (int i = 0; i < n; i++)
    if (inputs[i] && lab_requires_grad(inputs[i])) return 1;
  return 0;
}

lab_node *lab_node_new(const char *name, lab_backward_fn fn, int n, lab_tensor *const *inputs) {
  lab_node *node = calloc(1, sizeof *node);
  lab_edge *edges = calloc((size_t)(n ? n : 1), sizeof *edges);
  if (!node || !edges) {
    free(node);
    free(edges);
    lab_fail(name, "out of memory recording the graph");
    return NULL;
  }
  node->refcount = 1;
  node->name = name;
  node->backward = fn;
  node->nin = n;
  node->next = edges;
  if (debugging && anomaly_on && anomaly.where) node->anomaly_where = anomaly.where(anomaly.ctx, name);
  for (int i = 0; i < n; i++) {
    lab_tensor *t = inputs[i];
    if (!t || !lab_requires_grad(t)) continue;
    if (t->ag->grad_fn) {
      edges[i].node = t->ag->grad_fn;
      edges[i].node->refcount++;
    } else {
      edges[i].leaf = t;
      lab_tensor_retain(t);
    }
    if (i < 8) node->in_dtype[i] = t->dtype;
    edges[i].ndim = t->ndim;
    memcpy(edges[i].shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    edges[i].dtype = t->dtype;
    edges[i].device = lab_device_of(t);
  }
  return node;
}

/* What the graph keeps alive for backward is activation memory, unless it is already known
 * as something else (a parameter saved by matmul stays a parameter). */
static void tag_activation(lab_tensor *t) {
  if (t->storage->tag == LAB_MEM_OTHER) lab_storage_set_tag(t->storage, LAB_MEM_ACTIVATION);
}

int lab_node_save(lab_node *n, int slot, lab_tensor *t) {
  lab_tensor *alias = lab_detach(t);
  if (!alias) return -1;
  tag_activation(t);
  lab_tensor_release(n->saved[slot]);
  n->saved[slot] = alias;
  return 0;
}

int lab_node_attach(lab_node *n, lab_tensor *out) {
  if (debugging) {
    int rc = maybe_plant(n->name, 0, out);
    if (rc == 0 && anomaly_on) rc = check_finite(n, out, "its output");
    if (rc < 0) {
      lab_node_release(n);
      return -1;
    }
  }
  lab_ag_meta *m = meta(out);
  if (!m) {
    lab_node_release(n);
    return lab_fail(n->name, "out of memory");
  }
  lab_node_release(m->grad_fn);
  m->grad_fn = n;
  m->requires_grad = 1;
  tag_activation(out);
  return 0;
}

static void release_saved(lab_node *n) {
  for (int i = 0; i < LAB_NODE_SAVED; i++) {
    lab_tensor_release(n->saved[i]);
    n->saved[i] = NULL;
  }
  if (n->free_ctx) n->free_ctx(n->ctx);
  n->ctx = NULL;
  n->free_ctx = NULL;
}

/* Releases iteratively: a long chain of nodes (a deep model) must not recurse deeply. */
void lab_node_release(lab_node *n) {
  lab_node *stack_small[64];
  lab_node **stack = stack_small;
  int cap = 64, top = 0;
  if (!n) return;
  stack[top++] = n;
  while (top > 0) {
    lab_node *x = stack[--top];
    if (--x->refcount > 0) continue;
    for (int i = 0; i < x->nin; i++) {
      lab_tensor_release(x->next[i].leaf);
      if (x->next[i].node) {
        if (top == cap) {
          lab_node **bigger = malloc(sizeof *bigger * (size_t)cap * 2);
          if (!bigger) continue; /* leak rather than crash */
          memcpy(bigger, stack, sizeof *stack * (size_t)top);
          if (stack != stack_small) free(stack);
          stack = bigger;
          cap *= 2;
        }
        stack[top++] = x->next[i].node;
      }
    }
    release_saved(x);
    lab_tensor_release(x->pending);
    free_hooks(x->hooks);
    free(x->anomaly_where);
    free(x->next);
    free(x);
  }
  if (stack != stack_small) free(stack);
}

/* ---- hooks ---- */

int lab_register_hook(lab_tensor *t, lab_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
  if (!lab_requires_grad(t))
    return lab_fail("register_hook", "cannot register a hook on a tensor that does not require grad");
  lab_hook *h = calloc(1, sizeof *h);
  if (!h) return lab_fail("register_hook", "out of memory");
  h->fn = fn;
  h->ctx = ctx;
  h->free_ctx = free_ctx;
  h->id = next_hook_id++;
  lab_hook **list = t->ag->grad_fn ? &t->ag->grad_fn->hooks : &t->ag->hooks;
  while (*list) list = &(*list)->next;
  *list = h;
  return h->id;
}

int lab_register_post_accumulate_hook(lab_tensor *t, lab_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
  if (!lab_requires_grad(t) || !lab_is_leaf(t))
    return lab_fail("register_post_accumulate_grad_hook", "only leaf tensors that require grad accumulate gradients");
  lab_hook *h = calloc(1, sizeof *h);
  if (!h) return lab_fail("register_post_accumulate_grad_hook", "out of memory");
  h->fn = fn;
  h->ctx = ctx;
  h->free_ctx = free_ctx;
  h->id = next_hook_id++;
  lab_hook **list = &t->ag->post_hooks;
  while (*list) list = &(*list)->next;
  *list = h;
  return h->id;
}

/* the queue of end-of-backward callbacks; depth > 0 while a backward runs */
static lab_hook *end_queue;
static int backward_depth;

int lab_queue_backward_callback(lab_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
  if (backward_depth == 0) {
    if (free_ctx) free_ctx(ctx);
    return lab_fail("queue_callback", "no backward is running");
  }
  lab_hook *h = calloc(1, sizeof *h);
  if (!h) return lab_fail("queue_callback", "out of memory");
  h->fn = fn;
  h->ctx = ctx;
  h->free_ctx = free_ctx;
  lab_hook **list = &end_queue;
  while (*list) list = &(*list)->next;
  *list = h;
  return 0;
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
static int check_grad(const char *who, const lab_tensor *g, int ndim, const int64_t *shape, lab_device dev) {
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
static int run_hooks(lab_hook *h, lab_tensor **g, const char *on) {
  for (; h; h = h->next) {
    lab_tensor *rep = NULL;
    if (h->fn(h->ctx, *g, &rep) < 0) return -1;
    if (rep) {
      char who[96];
      snprintf(who, sizeof who, "hook on %s", on);
      if (check_grad(who, rep, (*g)->ndim, (*g)->shape, lab_device_of(*g)) < 0) {
        lab_tensor_release(rep);
        return -1;
      }
      lab_tensor_release(*g);
      *g = rep;
    }
  }
  return 0;
}

/* ---- gradient arithmetic ---- */

lab_tensor *lab_sum_to_shape(lab_tensor *g, int ndim, const int64_t *shape) {
  lab_tensor_retain(g);
  /* leading dims that the operand did not have */
  while (g->ndim > ndim) {
    lab_tensor *s = lab_reduction(LAB_R_SUM, g, 0, 0, 0);
    lab_tensor_release(g);
    if (!(g = s)) return NULL;
  }
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1 && g->shape[d] != 1) {
      lab_tensor *s = lab_reduction(LAB_R_SUM, g, d, 1, 0);
      lab_tensor_release(g);
      if (!(g = s)) return NULL;
    }
  }
  return g;
}

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
  if (run_hooks(leaf->ag->hooks, &g, "a leaf tensor") < 0) {
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

typedef struct {
  lab_node **items;
  int n, cap;
} node_list;

typedef struct {
  lab_tensor **items;
  int n, cap;
} tensor_list;

static int push_tensor(tensor_list *l, lab_tensor *t) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 64;
    lab_tensor **items = realloc(l->items, sizeof *items * (size_t)cap);
    if (!items) return lab_fail("backward", "out of memory");
    l->items = items;
    l->cap = cap;
  }
  l->items[l->n++] = t;
  return 0;
}

static int push(node_list *l, lab_node *n) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 64;
    lab_node **items = realloc(l->items, sizeof *items * (size_t)cap);
    if (!items) return lab_fail("backward", "out of memory");
    l->items = items;
    l->cap = cap;
  }
  l->items[l->n++] = n;
  return 0;
}

static int backward_pass(lab_tensor *root, lab_tensor *grad, int retain_graph);

/* anomaly mode and planted NaN on the gradients a node's backward returned */
static int check_gradients(lab_node *x, lab_tensor **gin) {
  for (int i = 0; i < x->nin; i++) {
    if (!gin[i]) continue;
    if (maybe_plant(x->name, 1, gin[i]) < 0) return -1;
    if (anomaly_on) {
      char what[80];
      snprintf(what, sizeof what, "the gradient of its input %d (backward)", i + 1);
      if (check_finite(x, gin[i], what) < 0) return -1;
    }
  }
  return 0;
}

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
  node_list all = {0}, stack = {0}, ready = {0};
  int rc = 0;
  lab_node *start = root->ag->grad_fn;
  start->seen = 1;
  start->deps = 0;
  if (push(&all, start) < 0 || push(&stack, start) < 0) rc = -1;
  tensor_list leaves = {0};
  while (rc == 0 && stack.n > 0) {
    lab_node *x = stack.items[--stack.n];
    for (int i = 0; i < x->nin; i++) {
      lab_tensor *leaf = x->next[i].leaf;
      if (leaf && leaf->ag->pending_uses++ == 0 && push_tensor(&leaves, leaf) < 0) rc = -1;
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
    if (run_hooks(x->hooks, &gout, x->name) < 0) {
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
    if (debugging && rc == 0) rc = check_gradients(x, gin);
    for (int i = 0; i < x->nin; i++) {
      lab_edge *e = &x->next[i];
      lab_tensor *gi = gin[i];
      gin[i] = NULL;
      if (rc == 0 && gi && (e->leaf || e->node)) {
        char who[96];
        snprintf(who, sizeof who, "%s backward (input %d)", x->name, i + 1);
        rc = check_grad(who, gi, e->ndim, e->shape, e->device);
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
      release_saved(x);
      x->released = 1;
    }
  }
  for (int i = 0; i < leaves.n; i++) leaves.items[i]->ag->pending_uses = 0;
  free(leaves.items);
  for (int i = 0; i < all.n; i++) {
    all.items[i]->seen = 0;
    lab_tensor_release(all.items[i]->pending);
    all.items[i]->pending = NULL;
  }
  free(all.items);
  free(stack.items);
  free(ready.items);
  return rc;
}
