/* The registry of device tables and the names of devices (from device.h's LAB_DEVICE_LIST, so
 * this file spells no device's name). The devices register themselves (device.h): the cpu's table and the sim's opener are always there, cuda's opener where the
 * engine has its loader (runtime/cuda/loader.c), which opens the plugin the first time a
 * caller asks for cuda. So callers never test for a device with #ifdef, llmlab starts without
 * loading CUDA, and this file includes no device's header. */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define LAB_DEV_NAME_(e, name) name,
static const char *type_names[LAB_NDEVTYPES] = {LAB_DEVICE_LIST(LAB_DEV_NAME_)};
#undef LAB_DEV_NAME_
static const lab_device_ops *tables[LAB_NDEVTYPES];
static lab_device_opener openers[LAB_NDEVTYPES];
static const char *(*whys[LAB_NDEVTYPES])(void);

void lab_device_register(lab_device_type type, const lab_device_ops *ops) { tables[type] = ops; }

void lab_device_provide(lab_device_type type, lab_device_opener open, const char *(*why)(void)) {
  openers[type] = open;
  whys[type] = why;
}

const lab_device_ops *lab_device_ops_of(lab_device_type type) {
  if ((unsigned)type >= LAB_NDEVTYPES) return NULL;
  if (!tables[type] && openers[type]) tables[type] = openers[type](); /* NULL: not loadable here */
  return tables[type];
}

const char *lab_device_why(lab_device_type type) {
  if ((unsigned)type >= LAB_NDEVTYPES) return "";
  if (!openers[type] && !tables[type]) return "not compiled in";
  return whys[type] ? whys[type]() : "";
}

static lab_device default_device;

lab_device lab_default_device(void) { return default_device; }
void lab_set_default_device(lab_device d) { default_device = d; }

/* the CUDA device's state, then on a line of its own what the sim device runs (llmlab --version) */
const char *lab_cuda_status(void) {
  static char buf[1600];
  const lab_device_ops *ops = lab_device_ops_of(LAB_DEV_CUDA), *sim = lab_device_ops_of(LAB_DEV_SIM);
  snprintf(buf, sizeof buf, "%s\n%s", !ops ? lab_device_why(LAB_DEV_CUDA) : (ops->describe ? ops->describe() : "CUDA compiled in"),
           sim && sim->describe ? sim->describe() : "sim device");
  return buf;
}

const char *lab_device_str(lab_device d, char *buf, size_t n) {
  if (d.type == LAB_DEV_CPU) snprintf(buf, n, "cpu");
  else snprintf(buf, n, "%s:%d", (unsigned)d.type < LAB_NDEVTYPES ? type_names[d.type] : "?", d.index);
  return buf;
}

int lab_device_count(lab_device_type type) {
  const lab_device_ops *ops = lab_device_ops_of(type);
  return ops ? ops->count() : 0;
}

/* this process's rank among the ranks on its node: "cuda" without an index means
 * cuda:(node rank mod GPUs), one rank per GPU as torchrun's LOCAL_RANK convention */
static int node_rank;
void lab_device_set_node_rank(int rank) { node_rank = rank > 0 ? rank : 0; }
int lab_device_node_rank(void) { return node_rank; }

int lab_device_parse(const char *op, const char *s, lab_device *out) {
  size_t len = strcspn(s, ":");
  int type = -1;
  for (int t = 0; t < LAB_NDEVTYPES; t++)
    if (strlen(type_names[t]) == len && strncmp(s, type_names[t], len) == 0) type = t;
  if (type < 0) return lab_fail(op, "unknown device '%s' (cpu, cuda, cuda:N or sim)", s);
  long index = 0;
  if (s[len] == ':') {
    char *end;
    index = strtol(s + len + 1, &end, 10);
    if (end == s + len + 1 || *end || index < 0 || index > 15)
      return lab_fail(op, "bad device index in '%s'", s);
  }
  if (type == LAB_DEV_CPU && index != 0) return lab_fail(op, "there is one cpu device, got '%s'", s);
  const lab_device_ops *ops = lab_device_ops_of((lab_device_type)type);
  if (!ops) {
    if (type == LAB_DEV_CUDA)
      return lab_fail(op, "device '%s': CUDA is not usable: %s (see llmlab --version)", s, lab_device_why(LAB_DEV_CUDA));
    return lab_fail(op, "device '%s' is not available in this build", s);
  }
  int count = ops->count();
  if (count == 0)
    return lab_fail(op, "device '%s': no CUDA device found on this machine (CUDA is compiled in; "
                    "llmlab --version says why)", s);
  if (index >= count)
    return lab_fail(op, "device '%s': only %d %s device%s present", s, count, type_names[type], count == 1 ? "" : "s");
  if (type == LAB_DEV_CUDA && s[len] != ':') index = node_rank % count;
  out->type = (lab_device_type)type;
  out->index = (int)index;
  return 0;
}
