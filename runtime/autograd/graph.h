/* Recording the graph (internal to runtime/autograd; graph.c): what the backward pass uses
 * beyond autograd.h. */
#ifndef LAB_RUNTIME_AUTOGRAD_GRAPH_H
#define LAB_RUNTIME_AUTOGRAD_GRAPH_H

#include "autograd.h"

/* releases n's saved tensors and what it owns (ctx): after its backward, unless retained */
void ag_release_saved(lab_node *n);

#endif
