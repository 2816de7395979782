/* Shared helpers of the Lua binding: tensor userdata, 1-based dims, rank-prefixed errors. */
#ifndef LAB_LUA_H
#define LAB_LUA_H

#include <lauxlib.h>
#include <lua.h>

#include "runtime/lab.h"

#define LAB_TENSOR_MT "lab.Tensor"

/* Raises "rank R: <message>" (the rank is part of every error a user sees). */
int ll_error(lua_State *L, const char *fmt, ...);
/* Raises the runtime's last error with the rank prefix. */
int ll_runtime_error(lua_State *L);

lab_tensor *ll_check_tensor(lua_State *L, int idx);
/* For shape, dtype and other facts: also accepts a ZeRO-3 parameter whose data is away. */
lab_tensor *ll_check_tensor_meta(lua_State *L, int idx);
lab_tensor *ll_test_tensor(lua_State *L, int idx); /* NULL if not a tensor */
/* Pushes a tensor userdata owning the reference t; raises the runtime error if t is NULL. */
void ll_push_tensor(lua_State *L, lab_tensor *t);
/* A binding of op(tensor at 1) -> tensor (t:clone(), lab.silu(x)): pushes the result; 1 */
int ll_push_unary(lua_State *L, lab_tensor *(*op)(lab_tensor *));
/* Same, for functions returning -1/0. */
void ll_check_rc(lua_State *L, int rc);

/* Integers from Lua: an integer-valued number (3 or 3.0), never a string ("3") or a fraction
 * (0.5, which luaL_checkinteger refused without naming the op, and (int) casts of Lua
 * integers truncated 2^32 + 2 to 2). `what` names the argument ("src", "dim", "ranks[2]"). */
lua_Integer ll_check_integer(lua_State *L, int idx, const char *op, const char *what);
/* ... that fits a C int (dims, chunks, ranks, tags, thread counts) */
int ll_check_int(lua_State *L, int idx, const char *op, const char *what);
int ll_opt_int(lua_State *L, int idx, int def, const char *op, const char *what);
/* options field `field` of the table at opts (0: none) as an int, def when absent */
int ll_opt_int_field(lua_State *L, int opts, const char *field, int def, const char *op);

/* Lua dim (1-based, negative from the end) at idx to a 0-based C dim for a tensor of ndim
 * dims; `extra` allows one past the end (unsqueeze, stack). */
int ll_check_dim(lua_State *L, int idx, int ndim, int extra, const char *op);
int ll_to_dim(lua_State *L, lua_Integer d, int ndim, int extra, const char *op);
/* Sizes given as varargs from idx (stopping at a table of options) or as one table. */
int ll_read_shape(lua_State *L, int idx, int64_t *shape, const char *op);
/* dtype from an option table at idx (field "dtype") or a string; def if absent. */
lab_dtype ll_opt_dtype(lua_State *L, int idx, lab_dtype def);
/* Options field device= ('cpu', 'cuda', 'cuda:1', 'sim'), else def; a Lua error names a
 * device that does not exist here and why. */
lab_device ll_opt_device(lua_State *L, int idx, lab_device def);
/* A device name at idx (a string, or a tensor: its device). */
lab_device ll_check_device(lua_State *L, int idx, const char *op);
lab_dtype ll_check_dtype_name(lua_State *L, int idx);
/* A file or directory name at idx: a string with no NUL byte inside (C sees only the part before
 * one: "a\0b" named "a", and ckpt.save looped forever looking for a step name free in "a"). */
const char *ll_check_path(lua_State *L, int idx, const char *op);
/* Index of a trailing options table among the arguments, or 0. */
int ll_options_index(lua_State *L);
int ll_opt_bool(lua_State *L, int opts, const char *field, int def);
double ll_opt_number(lua_State *L, int opts, const char *field, double def);
/* A number or tensor argument as a tensor (new reference); numbers become 0-d tensors of a
 * type suited to `like` (see ll_scalar_for). */
lab_tensor *ll_scalar_for(lua_State *L, int idx, const lab_tensor *like, int *out_dtype);
/* Raises unless argument idx is a tensor, a number or a boolean: what ll_scalar_for accepts.
 * A caller that takes several of them checks them all before the first reference exists. */
void ll_check_scalar_arg(lua_State *L, int idx);

/* Raises when t requires grad and grad mode is on: in-place writes would corrupt what the
 * graph saved (optimizers update parameters inside lab.no_grad). */
void ll_check_inplace(lua_State *L, lab_tensor *t, const char *op);
/* t.grad, t.requires_grad, t.grad_fn, t.is_leaf: pushes and returns 1 if k is one of them */
int ll_autograd_property(lua_State *L, lab_tensor *t, const char *k);
/* t.grad = g / t.requires_grad = b from the value at idx; returns 1 if k is one of them */
int ll_autograd_set_property(lua_State *L, lab_tensor *t, const char *k, int idx);
void ll_register_tensor_grad(lua_State *L);   /* requires_grad_, backward, hooks (l_tensor_grad.c) */
void ll_register_grad_mode(lua_State *L);     /* lab.no_grad, lab.enable_grad, ... (l_grad_mode.c) */
void ll_register_nn_ops(lua_State *L);        /* lab.linear, lab.sdpa, ... (l_nn_ops.c) */
void ll_register_autograd(lua_State *L);      /* lab.autograd (l_autograd.c) */
void ll_register_autograd_dist(lua_State *L); /* lab.autograd.dist into the table at -1 */
/* t:backward([grad][, {retain_graph=}]), lab.autograd.backward */
int ll_backward(lua_State *L);
void ll_register_optim(lua_State *L);      /* lab._optim_c: fused AdamW steps (l_optim.c) */
void ll_register_storage(lua_State *L);    /* lab._rebind, lab._release_data, ... (l_storage.c) */
void ll_register_npy(lua_State *L);        /* lab.load_npy, Tensor:save_npy (l_npy.c) */
void ll_register_ckpt(lua_State *L);       /* lab._ckpt: the C side of lab.ckpt (l_ckpt*.c) */
void ll_register_ckpt_read(lua_State *L);  /* its readers, into the table at -1 */
void ll_register_ckpt_write(lua_State *L); /* its writer jobs, into the table at -1 */
void ll_register_files(lua_State *L);      /* lab._list_files: a directory walk without a shell */
void ll_register_debug(lua_State *L);      /* checksums, bit flips, anomaly mode, planted NaN */
/* the entries of dir (without . and ..), sorted, malloc'ed with *count; NULL with errno set
 * when it cannot be read. ll_free_dir frees them. */
char **ll_read_dir(const char *dir, size_t *count);
void ll_free_dir(char **names, size_t n);

struct lab_group;
/* the group in options table at opts (field "group"), or the world */
struct lab_group *ll_opt_group(lua_State *L, int opts);
/* all_to_all_single's split sizes from options field `field` (one per rank of g), in a
 * buffer left on the Lua stack; NULL when absent */
const int64_t *ll_opt_splits(lua_State *L, int opts, const char *field, struct lab_group *g);

/* The main thread of L's state. C callbacks that outlive the call registering them (hooks,
 * autograd.Function nodes) keep this one: a coroutine's lua_State is freed when the
 * coroutine is collected, and a backward run later would use freed memory. */
lua_State *ll_main_state(lua_State *L);

/* A userdata class: the metatable named mt with the metamethods meta (__gc, __close, ...) and
 * __index a table of methods; left off the stack. */
void ll_new_class(lua_State *L, const char *mt, const luaL_Reg *meta, const luaL_Reg *methods);
/* Adds functions to the tensor methods (t:name(...)); the metatable must exist. */
void ll_add_tensor_methods(lua_State *L, const luaL_Reg *methods);
/* lua_pcall for a callback the runtime runs (a hook, a Function's backward): an error
 * becomes lab_fail(op, its message), popped, and -1, for the runtime to report. */
int ll_pcall_runtime(lua_State *L, int nargs, int nresults, const char *op);

/* A Lua function kept in the registry for a C callback that outlives the call registering
 * it (a hook, an end-of-backward callback), with the main thread's state. */
typedef struct {
  lua_State *L;
  int ref;
} ll_fn_ref;
/* the function at idx, kept (malloc'd), or NULL when out of memory */
ll_fn_ref *ll_fn_ref_new(lua_State *L, int idx);
/* releases the reference (a free_ctx for the runtime's callbacks) */
void ll_fn_ref_free(void *p);

/* A binding that only calls fn (l_cbind.c): pushes what a getter returns (as an integer,
 * boolean, number or string), passes argument 1 to a setter (any value as a boolean, or a
 * number), or runs an action. Registered from a table ending in {NULL}. */
typedef enum {
  LL_CB_INT,        /* int (void) -> integer */
  LL_CB_LONG,       /* long (void) -> integer */
  LL_CB_BOOL,       /* int (void) -> boolean */
  LL_CB_NUMBER,     /* double (void) -> number */
  LL_CB_STRING,     /* const char * (void) -> string */
  LL_CB_SET_BOOL,   /* void (int), argument 1 as a boolean */
  LL_CB_SET_NUMBER, /* void (double), argument 1 a number */
  LL_CB_RUN         /* void (void) */
} ll_cbind_kind;
typedef struct {
  const char *name;
  ll_cbind_kind kind;
  union {
    int (*get_int)(void);
    long (*get_long)(void);
    double (*get_number)(void);
    const char *(*get_string)(void);
    void (*set_int)(int);
    void (*set_number)(double);
    void (*run)(void);
  } fn;
} ll_cbind;
/* t[name] = a function calling fn for each entry of list, into the table at -1 */
void ll_set_cbinds(lua_State *L, const ll_cbind *list);

int ll_rank(void);
void ll_register_tensor(lua_State *L);      /* metatable and methods */
void ll_register_creation(lua_State *L);    /* into table at -1 */
void ll_register_tensor_ops(lua_State *L);  /* methods into the metatable's method table at -1 */
void ll_register_dist(lua_State *L);        /* lab.dist into table at -1 */
void ll_register_device(lua_State *L);      /* default device, lab.cuda, :cuda(), :cpu() */
void ll_register_mem(lua_State *L);         /* lab.mem into table at -1 */
void ll_register_sim(lua_State *L);         /* lab.sim: the SIMT interpreter's records (l_sim.c) */

#endif
