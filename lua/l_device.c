/* Devices from Lua: lab.set_default_device / lab.default_device, lab.cuda (is_available,
 * device_count, synchronize), the tensor methods :cuda() and :cpu(), and lab._move_ with
 * which Module:to moves parameters in place. t:to(device) is in l_tensor.c. */
#include <stdlib.h>

#include "lab_lua.h"
#include "runtime/lab.h"

static void push_device(lua_State *L, lab_device d) {
  char name[32];
  lua_pushstring(L, lab_device_str(d, name, sizeof name));
}

static int l_set_default_device(lua_State *L) {
  lab_set_default_device(ll_check_device(L, 1, "set_default_device"));
  return 0;
}

static int l_default_device(lua_State *L) {
  push_device(L, lab_default_device());
  return 1;
}

static int l_cuda_is_available(lua_State *L) {
  lua_pushboolean(L, lab_device_count(LAB_DEV_CUDA) > 0);
  return 1;
}

static int l_cuda_device_count(lua_State *L) {
  lua_pushinteger(L, lab_device_count(LAB_DEV_CUDA));
  return 1;
}

/* Waits for the work queued on a CUDA device (the current default one, or the one named). */
/* The device named, or the default one when it is a GPU's (cuda, or sim). With a cpu default:
 * this rank's GPU ("cuda": node rank mod GPUs), as torch.cuda.synchronize() waits on the
 * current device: cuda:0 made ranks 1-7 of an 8-GPU node time nothing and open a context on
 * GPU 0. Where no GPU is, the sim plays CUDA when it runs runtime/cuda's device (runtime/simrt):
 * sim:(node rank mod its devices), so tests/sim/test_cuda_sync.lua can see which one waited. */
static int l_cuda_synchronize(lua_State *L) {
  lab_device d = lua_isnoneornil(L, 1) ? lab_default_device() : ll_check_device(L, 1, "cuda.synchronize");
  if (d.type == LAB_DEV_CPU) {
    if (lab_device_count(LAB_DEV_CUDA) > 0) ll_check_rc(L, lab_device_parse("cuda.synchronize", "cuda", &d));
    else if (lab_sim_is_simrt() && lab_device_count(LAB_DEV_SIM) > 0)
      d = (lab_device){LAB_DEV_SIM, lab_device_node_rank() % lab_device_count(LAB_DEV_SIM)};
    else return 0; /* nothing queued anywhere */
  }
  ll_check_rc(L, lab_device_ops_of(d.type)->synchronize(d.index));
  return 0;
}

/* lab._move_(t, device): t's values move to the device in place (identity kept) */
static int l_move(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  ll_check_rc(L, lab_move_(t, ll_check_device(L, 2, "to")));
  lua_settop(L, 1);
  return 1;
}

static int m_cuda(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  lab_device d;
  ll_check_rc(L, lab_device_parse("cuda", luaL_optstring(L, 2, "cuda"), &d));
  ll_push_tensor(L, lab_ad_to_device(t, d));
  return 1;
}

static int m_cpu(lua_State *L) {
  ll_push_tensor(L, lab_ad_to_device(ll_check_tensor(L, 1), lab_cpu()));
  return 1;
}

/* sim_counter(name): a count the sim's device keeps (runtime/device.h's counter entry: the
 * cuBLASLt plan cache's "lt_plans", "lt_heuristics", "lt_matmuls", "lt_workspace"); an error
 * for a name it does not keep */
static int l_cuda_sim_counter(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const lab_device_ops *ops = lab_device_ops_of(LAB_DEV_SIM);
  long v = ops && ops->counter ? ops->counter(name) : -1;
  if (v < 0)
    return ll_error(L, "cuda.sim_counter: the sim device keeps no count '%s' (lt_plans, lt_heuristics, lt_matmuls, "
                    "lt_workspace, synchronize:N, ready:N, launches:N, pointer_queries; the sim runs runtime/cuda "
                    "only where built with the SIMT interpreter)", name);
  lua_pushinteger(L, v);
  return 1;
}

/* Into the lab table at -1. The default device comes from LLMLAB_DEVICE (llmlab --device sets
 * it, so ranks started by mpirun inherit it); a device that does not exist is an error here. */
void ll_register_device(lua_State *L) {
  static const luaL_Reg fns[] = {{"set_default_device", l_set_default_device},
                                 {"default_device", l_default_device},
                                 {"_move_", l_move},
                                 {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
  static const luaL_Reg cuda[] = {{"is_available", l_cuda_is_available},
                                  {"device_count", l_cuda_device_count},
                                  {"synchronize", l_cuda_synchronize},
                                  {"sim_counter", l_cuda_sim_counter},
                                  {NULL, NULL}};
  static const ll_cbind cuda_values[] = {
      {"status", LL_CB_STRING, {.get_string = lab_cuda_status}},
      /* sim_host_syncs(): the sim device's count of host synchronizations (device-to-host
       * copies, synchronize, cross-entropy's row count: where a GPU's stream would drain) */
      {"sim_host_syncs", LL_CB_LONG, {.get_long = lab_sim_host_syncs}},
      /* sim_uploads(): the sim device's count of host-to-device copies */
      {"sim_uploads", LL_CB_LONG, {.get_long = lab_sim_uploads}},
      /* sim_nccl_calls(): NCCL calls the sim's NCCL (runtime/simrt/nccl_mpi.c) posted */
      {"sim_nccl_calls", LL_CB_LONG, {.get_long = lab_dist_sim_nccl_calls}},
      /* sim_nccl_events(): CUDA events nccl.c created in this process on the sim (its pool's) */
      {"sim_nccl_events", LL_CB_LONG, {.get_long = lab_dist_sim_nccl_events}},
      {NULL, 0, {NULL}}};
  luaL_newlib(L, cuda);
  ll_set_cbinds(L, cuda_values);
  lua_setfield(L, -2, "cuda");
  static const luaL_Reg methods[] = {{"cuda", m_cuda}, {"cpu", m_cpu}, {NULL, NULL}};
  ll_add_tensor_methods(L, methods);
  const char *env = getenv("LLMLAB_DEVICE");
  if (env && *env) {
    lab_device d;
    if (lab_device_parse("LLMLAB_DEVICE", env, &d) < 0) ll_runtime_error(L);
    lab_set_default_device(d);
  }
}
