/* Recording the graph: grad mode, the autograd state of tensors, each op's node with its
 * edges to the inputs' producers (or leaves), its saved tensors, its release. */
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "anomaly.h"
#include "graph.h"
#include "hooks.h"

static int grad_mode = 1;

int lab_grad_enabled(void) { return grad_mode; }
void lab_set_grad_enabled(int on) { grad_mode = on != 0; }

static void meta_free(lab_ag_meta *m) {
  lab_tensor_release(m->grad);
  lab_node_release(m->grad_fn);
  ag_free_hooks(m->hooks);
  ag_free_hooks(m->post_hooks);
  free(m);
}

/* Tensors sit below autograd: they free this state through the hook set here, on the first
 * tensor that gets any. */
static lab_ag_meta *meta(lab_tensor *t) {
  if (!t->ag) {
    lab_tensor_set_ag_free(meta_free);
    t->ag = calloc(1, sizeof *t->ag);
  }
  return t->ag;
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
  if (ag_debugging) node->anomaly_where = ag_anomaly_where(name);
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
  if (ag_debugging) {
    int rc = ag_check_output(n, out);
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

void ag_release_saved(lab_node *n) {
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
    ag_release_saved(x);
    lab_tensor_release(x->pending);
    ag_free_hooks(x->hooks);
    free(x->anomaly_where);
    free(x->next);
    free(x);
  }
  if (stack != stack_small) free(stack);
}
