/* Reverse-mode automatic differentiation. An op whose inputs require grad records a node
 * holding what its backward needs (saved tensors, scalars) and edges to the nodes that made
 * its inputs, or to the leaf tensors themselves. backward() walks the graph from a root in
 * dependency order, calls each node's backward with the gradient of its output, and
 * accumulates into leaves' .grad. Nodes free their saved tensors after backward unless the
 * graph is retained. The differentiable ops are declared in ops.h. */
#ifndef LAB_RUNTIME_AUTOGRAD_H
#define LAB_RUNTIME_AUTOGRAD_H

#include "../tensor.h"

typedef struct lab_node lab_node;

/* grad_in[i] receives the gradient for input i (a new reference) or stays NULL. */
typedef int (*lab_backward_fn)(lab_node *n, lab_tensor *grad_out, lab_tensor **grad_in);

/* A hook sees a gradient before it is used; it may return a replacement (new reference) in
 * *replace. Returns -1 on error (with lab_fail). */
typedef int (*lab_hook_fn)(void *ctx, lab_tensor *grad, lab_tensor **replace);

typedef struct lab_hook {
  lab_hook_fn fn;
  void *ctx;
  void (*free_ctx)(void *ctx);
  int id;
  struct lab_hook *next;
} lab_hook;

typedef struct {
  lab_node *node;   /* the node that produced this input, or */
  lab_tensor *leaf; /* the leaf that requires grad (retained), or neither */
  /* the input as it was recorded: every gradient sent along this edge must have its shape
   * and device (the engine checks what backward functions and hooks return) */
  int ndim;
  int64_t shape[LAB_MAX_DIMS];
  lab_dtype dtype;
  lab_device device;
} lab_edge;

#define LAB_NODE_SAVED 6
/* room in a node for its op's context (two recorded shapes and a few scalars fit) */
#define LAB_NODE_CTX_BYTES 224

struct lab_node {
  int refcount;
  const char *name;
  lab_backward_fn backward;
  int nin;
  lab_edge *next;
  lab_tensor *saved[LAB_NODE_SAVED]; /* released after backward unless retained */
  /* The op's context, as PyTorch's ctx: a struct of named fields (xent_ctx, norm_ctx, ...)
   * declared beside the op, filled by its forward and read by its backward through
   * AG_CTX(n, T) (util.h). Stored in the node, so recording allocates nothing more. */
  union {
    int64_t align_i;
    double align_d;
    void *align_p;
    unsigned char bytes[LAB_NODE_CTX_BYTES];
  } op_ctx;
  int in_dtype[8];
  /* what the node owns beyond its saved tensors (a group, a Lua function), freed with it */
  void *ctx;
  void (*free_ctx)(void *ctx);
  int released;
  lab_hook *hooks; /* hooks on the output tensor of this node */
  char *anomaly_where; /* anomaly mode: where its forward ran (module, traceback); malloc'd */
  /* engine scratch */
  lab_tensor *pending;
  int deps;
  int seen;
};

typedef struct lab_ag_meta {
  int requires_grad;
  lab_tensor *grad;
  lab_node *grad_fn;
  lab_hook *hooks;      /* leaf hooks: see the incoming gradient */
  lab_hook *post_hooks; /* leaf hooks after accumulation: see the leaf (grad passed NULL) */
  int pending_uses;     /* during a backward: edges into this leaf not yet delivered */
} lab_ag_meta;

/* grad mode (no_grad regions switch it off) */
int lab_grad_enabled(void);
void lab_set_grad_enabled(int on);

int lab_requires_grad(const lab_tensor *t);
int lab_set_requires_grad(lab_tensor *t, int on); /* leaves only */
int lab_is_leaf(const lab_tensor *t);
lab_tensor *lab_grad_of(const lab_tensor *t); /* borrowed, may be NULL */
void lab_set_grad(lab_tensor *t, lab_tensor *g); /* takes a new reference; NULL clears */
const char *lab_grad_fn_name(const lab_tensor *t);

/* A tensor sharing t's storage with no autograd history. */
lab_tensor *lab_detach(lab_tensor *t);

/* ---- recording ---- */
/* Whether an op over these inputs must record a node. */
int lab_ag_needed(int n, lab_tensor *const *inputs);
/* A node with edges to the inputs' producers (or the inputs themselves, for leaves). */
lab_node *lab_node_new(const char *name, lab_backward_fn fn, int n, lab_tensor *const *inputs);
/* Saves a tensor for backward (as a detached alias: no reference cycle through outputs). */
int lab_node_save(lab_node *n, int slot, lab_tensor *t);
/* Makes out the node's output; consumes the caller's reference to the node. */
int lab_node_attach(lab_node *n, lab_tensor *out);
void lab_node_release(lab_node *n);

/* Adds a hook; returns its id (> 0) or -1. */
int lab_register_hook(lab_tensor *t, lab_hook_fn fn, void *ctx, void (*free_ctx)(void *));
int lab_remove_hook(lab_tensor *t, int id);

/* A hook run after a gradient was accumulated into leaf t's .grad (DDP and ZeRO start
 * their communication there); fn receives grad = the leaf's accumulated .grad. */
int lab_register_post_accumulate_hook(lab_tensor *t, lab_hook_fn fn, void *ctx, void (*free_ctx)(void *));

/* Callbacks queued during a backward run once when that backward has finished, in queue
 * order (DDP waits for its last buckets there). Returns -1 when no backward is running. */
int lab_queue_backward_callback(lab_hook_fn fn, void *ctx, void (*free_ctx)(void *));

/* backward from root; grad may be NULL for a one-element root (implicit 1). */
int lab_backward(lab_tensor *root, lab_tensor *grad, int retain_graph);

/* ---- anomaly mode (lab.autograd.detect_anomaly) ----
 * While on, every node records where its forward ran (`where`, from the layer above: the
 * module and the Lua traceback), every output a node is attached to and every gradient a
 * backward function returns is checked for NaN and Inf, and the first one found fails the op
 * (or the backward) with a message naming the op, the input and that place. Off, it costs
 * one test of a pointer per node. */
typedef struct {
  char *(*where)(void *ctx, const char *op); /* a malloc'd description, or NULL */
  void *ctx;
} lab_anomaly_hooks;
/* NULL turns anomaly mode off; the hooks are copied. */
void lab_set_anomaly(const lab_anomaly_hooks *h);
int lab_anomaly_enabled(void);

/* A planted NaN (lab.fault): the next time a node named `op` attaches its output (forward)
 * or returns its input gradients (backward), element 0 of it becomes NaN and fired(ctx, op,
 * backward) reports it; it fires once. op NULL disarms. */
typedef void (*lab_plant_fired)(void *ctx, const char *op, int backward);
int lab_plant_nan(const char *op, int backward, lab_plant_fired fired, void *ctx);

/* The gradient of a broadcast operand: g summed over the dims that were broadcast, to
 * `shape`. New reference. */
lab_tensor *lab_sum_to_shape(lab_tensor *g, int ndim, const int64_t *shape);

#endif
