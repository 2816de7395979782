/* Debug checks on the values nodes produce (internal to runtime/autograd; anomaly.c). */
#ifndef LAB_RUNTIME_AUTOGRAD_ANOMALY_H
#define LAB_RUNTIME_AUTOGRAD_ANOMALY_H

#include "autograd.h"

/* on while anomaly mode is on or a NaN is planted: the one test the hot paths pay otherwise */
extern int ag_debugging;

/* where the forward of a new node named op runs (malloc'd), or NULL when anomaly mode is off */
char *ag_anomaly_where(const char *op);
/* a node's output (forward): the planted NaN, then the NaN/Inf test; -1 with lab_fail */
int ag_check_output(lab_node *n, lab_tensor *out);
/* the same on the gradients x's backward returned (gin[0..nin-1], NULL entries skipped) */
int ag_check_gradients(lab_node *x, lab_tensor **gin);

#endif
