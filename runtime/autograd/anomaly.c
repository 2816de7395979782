/* Debug checks on the values nodes produce: anomaly mode (lab.autograd.detect_anomaly) tests
 * every output or gradient for NaN or Inf; a planted NaN (lab.fault) poisons one of them. */
#include <stdio.h>
#include <string.h>

#include "../bits.h"
#include "../error.h"
#include "anomaly.h"

int ag_debugging;
static int anomaly_on;
static lab_anomaly_hooks anomaly;
static struct {
  char op[64];
  int armed, backward;
  lab_plant_fired fired;
  void *ctx;
} plant;

static void update_debugging(void) { ag_debugging = anomaly_on || plant.armed; }

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

char *ag_anomaly_where(const char *op) {
  return anomaly_on && anomaly.where ? anomaly.where(anomaly.ctx, op) : NULL;
}

int ag_check_output(lab_node *n, lab_tensor *out) {
  int rc = maybe_plant(n->name, 0, out);
  if (rc == 0 && anomaly_on) rc = check_finite(n, out, "its output");
  return rc;
}

int ag_check_gradients(lab_node *x, lab_tensor **gin) {
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
