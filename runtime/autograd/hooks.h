/* Gradient hooks (internal to runtime/autograd; hooks.c): the hook lists as graph.c, the
 * backward pass use them. */
#ifndef LAB_RUNTIME_AUTOGRAD_HOOKS_H
#define LAB_RUNTIME_AUTOGRAD_HOOKS_H

#include "autograd.h"

/* frees a list (each hook's ctx through its free_ctx) */
void ag_free_hooks(lab_hook *h);
/* a hook appended to *list (id 0), or NULL with lab_fail naming op */
lab_hook *ag_append_hook(lab_hook **list, lab_hook_fn fn, void *ctx, void (*free_ctx)(void *), const char *op);
/* runs the list on *g, replacing it with what the hooks return; `on` names the tensor */
int ag_run_hooks(lab_hook *h, lab_tensor **g, const char *on);
/* fails unless g (from user code: a hook, a Function's backward) has the shape and device of
 * what it flows into, in a floating dtype; `who` says where it came from */
int ag_check_grad(const char *who, const lab_tensor *g, int ndim, const int64_t *shape, lab_device dev);

#endif
