/* lab.dist: torch.distributed for Lua. Collectives work in place on contiguous tensors;
 * options come as a table: {op='sum', group=g, async=true}. With async=true a call returns a
 * handle with :wait() and :test(). Groups (userdata made by new_group and split) and the facts
 * about the job are in l_dist_group.c. */
#include <stdio.h>
#include <string.h>

#include "l_dist.h"
#include "lab_lua.h"
#include "runtime/lab.h"

int ll_cat(lua_State *L);

#define WORK_MT "lab.dist.Work"

/* ---- work handles ---- */

typedef struct {
  lab_work *w;
} work_box;

static int push_work(lua_State *L, lab_work *w, int finisher) {
  work_box *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->w = w;
  luaL_setmetatable(L, WORK_MT);
  if (finisher) {
    lua_pushvalue(L, finisher);
    lua_setiuservalue(L, -2, 1);
  }
  return 1;
}

static int run_finisher(lua_State *L, int box_idx) {
  if (lua_getiuservalue(L, box_idx, 1) == LUA_TFUNCTION) {
    lua_pushnil(L);
    lua_setiuservalue(L, box_idx, 1); /* run once */
    lua_call(L, 0, 0);
  } else {
    lua_pop(L, 1);
  }
  return 0;
}

static int w_wait(lua_State *L) {
  work_box *b = luaL_checkudata(L, 1, WORK_MT);
  if (b->w) ll_check_rc(L, lab_work_wait(b->w));
  run_finisher(L, 1);
  lua_pushboolean(L, 1);
  return 1;
}

static int w_test(lua_State *L) {
  work_box *b = luaL_checkudata(L, 1, WORK_MT);
  int done = 1;
  if (b->w) ll_check_rc(L, lab_work_test(b->w, &done));
  if (done) run_finisher(L, 1);
  lua_pushboolean(L, done);
  return 1;
}

static int w_gc(lua_State *L) {
  work_box *b = luaL_checkudata(L, 1, WORK_MT);
  lab_work_free(b->w); /* waits if still pending: buffers are never freed under MPI */
  b->w = NULL;
  return 0;
}

/* ---- argument helpers ---- */

static lab_redop opt_redop(lua_State *L, int idx, int opts, const char *fn) {
  const char *name = NULL;
  int t = lua_type(L, idx);
  if (t == LUA_TSTRING) name = lua_tostring(L, idx);
  else if (t != LUA_TNONE && t != LUA_TNIL && idx != opts) /* all_reduce(x, 5) summed */
    ll_error(L, "%s: argument #%d: a reduction op name expected (sum, avg, max, min or prod), got %s", fn, idx,
             luaL_typename(L, idx));
  else if (opts) {
    lua_getfield(L, opts, "op");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
      ll_error(L, "%s: op: a reduction op name expected (sum, avg, max, min or prod), got %s", fn,
               luaL_typename(L, -1));
    name = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  if (!name) return LAB_RED_SUM;
  int op = lab_redop_from_name(name);
  if (op < 0) ll_error(L, "%s: unknown reduction op '%s' (use sum, avg, max, min or prod)", fn, name);
  return (lab_redop)op;
}

static void note_call_site(lua_State *L) {
  if (!lab_dist_checked() && !lab_dist_guarded()) return;
  lua_Debug ar;
  char site[128] = "";
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline > 0) {
      snprintf(site, sizeof site, "%s:%d", ar.short_src, ar.currentline);
      break;
    }
  }
  lab_dist_set_call_site(site);
  if (lab_dist_checked()) {
    luaL_traceback(L, L, NULL, 1);
    lab_dist_set_traceback(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

static int opt_async(lua_State *L, int opts) { return ll_opt_bool(L, opts, "async", 0); }

/* Finishes a call: raises on failure; returns the handle (async) or the tensor at ret_idx. */
static int done(lua_State *L, int rc, lab_work *w, int async, int ret_idx, int finisher) {
  if (rc < 0) return ll_runtime_error(L);
  if (async) return push_work(L, w, finisher);
  if (finisher) {
    lua_pushvalue(L, finisher);
    lua_call(L, 0, 0);
  }
  if (ret_idx) {
    lua_pushvalue(L, ret_idx);
    return 1;
  }
  return 0;
}

/* ---- collectives ---- */

/* An argument past a collective's documented positional ones was ignored: torch's order
 * all_reduce(t, op, group) ran on the world here and hung on the ranks outside the group.
 * Refused, pointing at the options table (which, when given, is the last argument). */
static void no_extra_args(lua_State *L, int npos, int opts, const char *op) {
  int last = opts ? opts - 1 : lua_gettop(L);
  if (last <= npos) return;
  const char *what = luaL_typename(L, npos + 1);
  if (luaL_getmetafield(L, npos + 1, "__name") == LUA_TSTRING) what = lua_tostring(L, -1);
  ll_error(L, "%s: argument #%d (a %s) is not used: the group and other options go in a table as the last "
           "argument, e.g. %s(t, {group = g})", op, npos + 1, what, op);
}

/* In a chunk run on some ranks (%on 1,3 or :ranks 1,3) lab.dist.rank() reports world ranks, so a
 * root or peer that the user's code gives there without a group is a world rank too: it is
 * turned into its number in the targeted ranks' group here, and one that is not targeted is
 * refused. An explicit group counts its own ranks (0 .. g:size()-1, g:rank()), and so does lab's
 * own code (lua/lab/): DDP broadcasts from rank 0 of its group, the targeted one when none is
 * given. */
static int chunk_root(lua_State *L, int opts, int root, const char *op, const char *what) {
  lab_group *d = lab_dist_default();
  if (d == lab_dist_world() || !d->world_ranks) return root;
  if (opts) {
    int explicit_group = lua_getfield(L, opts, "group") != LUA_TNIL;
    lua_pop(L, 1);
    if (explicit_group) return root;
  }
  lua_Debug ar; /* the nearest Lua function that called this one (gather and scatter run their
                 * body through a C wrapper, rooted_call, one C frame further up) */
  for (int level = 1; lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar); level++) {
    if (strcmp(ar.what, "C") == 0) continue;
    if (strstr(ar.source, "/lua/lab/")) return root;
    break;
  }
  char who[256] = "";
  for (int i = 0, len = 0; i < d->size; i++) {
    if (d->world_ranks[i] == root) return i;
    if (len < (int)sizeof who - 16) len += snprintf(who + len, sizeof who - (size_t)len, "%s%d", i ? "," : "", d->world_ranks[i]);
  }
  return ll_error(L, "%s: %s %d is not one of the ranks this chunk runs on (%s): in a %%on or :ranks chunk %s counts "
                     "world ranks, as lab.dist.rank() does; with {group = g} it counts g's ranks", op, what, root, who, what);
}

/* The options table of a collective with npos positional arguments, the root at argument 2
 * (named root_name: "src", "dst"; default 0, a world rank in a targeted chunk: chunk_root) and
 * async, read in that order. */
static int rooted_args(lua_State *L, int npos, const char *op, const char *root_name, int *root, int *async) {
  int opts = ll_options_index(L);
  no_extra_args(L, npos, opts, op);
  *root = chunk_root(L, opts, ll_opt_int(L, 2, 0, op, root_name), op, root_name);
  *async = opt_async(L, opts);
  return opts;
}

/* all_reduce(t[, op][, {op=, group=, async=}]) */
static int l_all_reduce(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int opts = ll_options_index(L);
  no_extra_args(L, 2, opts, "all_reduce");
  lab_redop op = opt_redop(L, 2, opts, "all_reduce");
  int async = opt_async(L, opts);
  lab_work *w = NULL;
  note_call_site(L);
  int rc = lab_all_reduce(ll_opt_group(L, opts), t, op, async ? &w : NULL);
  return done(L, rc, w, async, 1, 0);
}

/* broadcast(t, src[, opts]) */
static int l_broadcast(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int src, async, opts = rooted_args(L, 2, "broadcast", "src", &src, &async);
  lab_work *w = NULL;
  note_call_site(L);
  int rc = lab_broadcast(ll_opt_group(L, opts), t, src, async ? &w : NULL);
  return done(L, rc, w, async, 1, 0);
}

/* reduce(t, dst[, op][, opts]) */
static int l_reduce(lua_State *L) {
  lab_tensor *t = ll_check_tensor(L, 1);
  int dst, async, opts = rooted_args(L, 3, "reduce", "dst", &dst, &async);
  lab_redop op = opt_redop(L, 3, opts, "reduce");
  lab_work *w = NULL;
  note_call_site(L);
  int rc = lab_reduce(ll_opt_group(L, opts), t, op, dst, async ? &w : NULL);
  return done(L, rc, w, async, 1, 0);
}

/* A collective of the form op(out, in[, opts]) whose C function is fn. */
static int out_in(lua_State *L, const char *op, int (*fn)(lab_group *, lab_tensor *, lab_tensor *, lab_work **)) {
  lab_tensor *out = ll_check_tensor(L, 1), *in = ll_check_tensor(L, 2);
  int opts = ll_options_index(L);
  no_extra_args(L, 2, opts, op);
  int async = opt_async(L, opts);
  lab_work *w = NULL;
  note_call_site(L);
  int rc = fn(ll_opt_group(L, opts), out, in, async ? &w : NULL);
  return done(L, rc, w, async, 1, 0);
}

/* all_gather_into_tensor(out, in[, opts]): out is [size*d0, ...] or [size, ...] */
static int l_all_gather_into_tensor(lua_State *L) { return out_in(L, "all_gather_into_tensor", lab_all_gather); }

/* all_to_all(out, in[, opts]): block i of in goes to rank i, block j of out came from j */
static int l_all_to_all(lua_State *L) { return out_in(L, "all_to_all", lab_all_to_all); }

/* Copies between the blocks of a tensor (upvalue 1) and the tensors of a list (upvalue 2):
 * into the list (a gather's result), or into the blocks when upvalue 3 is true (a scatter's
 * input). */
static int copy_blocks(lua_State *L) {
  lab_tensor *buf = ll_check_tensor(L, lua_upvalueindex(1));
  int to_blocks = lua_toboolean(L, lua_upvalueindex(3));
  int n = (int)lua_rawlen(L, lua_upvalueindex(2));
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, lua_upvalueindex(2), i + 1);
    lab_tensor *t = ll_check_tensor(L, -1);
    lab_tensor *piece = lab_select(buf, 0, i);
    int rc = piece ? (to_blocks ? lab_copy_(piece, t) : lab_copy_(t, piece)) : -1;
    lab_tensor_release(piece);
    ll_check_rc(L, rc);
    lua_pop(L, 1);
  }
  return 0;
}

/* pushes copy_blocks over the tensor at buf and the list at list */
static void push_copy_blocks(lua_State *L, int buf, int list, int to_blocks) {
  lua_pushvalue(L, buf);
  lua_pushvalue(L, list);
  lua_pushboolean(L, to_blocks);
  lua_pushcclosure(L, copy_blocks, 3);
}

/* A tensor of n blocks shaped like t, [n, ...t's shape] on t's device, pushed. */
static lab_tensor *blocks_like(lua_State *L, lab_tensor *t, int n) {
  int64_t shape[LAB_MAX_DIMS + 1] = {n};
  memcpy(shape + 1, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  lab_tensor *buf = lab_tensor_empty_on(lab_device_of(t), t->dtype, t->ndim + 1, shape);
  if (!buf) ll_runtime_error(L);
  ll_push_tensor(L, buf);
  return buf;
}

/* all_gather(list, t[, opts]) fills list[1..size] (creating tensors where missing), or
 * all_gather(t[, opts]) returns a new list. */
static int l_all_gather(lua_State *L) {
  int opts = ll_options_index(L);
  int convenience = ll_test_tensor(L, 1) != NULL; /* all_gather(t[, opts]): one positional */
  no_extra_args(L, convenience ? 1 : 2, opts, "all_gather");
  if (convenience) { /* make the list */
    lua_newtable(L);
    lua_insert(L, 1);
    if (opts) opts++;
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lab_tensor *in = ll_check_tensor(L, 2);
  lab_group *g = ll_opt_group(L, opts);
  if (g->rank < 0) return ll_error(L, "all_gather: this rank is not a member of %s", g->name);
  int async = opt_async(L, opts);
  lab_tensor *buf = blocks_like(L, in, g->size);
  int buf_idx = lua_gettop(L);
  for (int i = 1; i <= g->size; i++) { /* the list's tensors, checked before communicating */
    lua_rawgeti(L, 1, i);
    lab_tensor *dst = ll_test_tensor(L, -1);
    if (!dst) {
      lua_pop(L, 1);
      ll_push_tensor(L, lab_tensor_empty_on(lab_device_of(in), in->dtype, in->ndim, in->shape));
      lua_pushvalue(L, -1);
      lua_rawseti(L, 1, i);
    } else if (!lab_same_shape(dst, in) || dst->dtype != in->dtype) {
      char a[128], b[128];
      return ll_error(L, "all_gather: list element %d is %s %s but the input is %s %s", i,
                      lab_shape_str(dst, a, sizeof a), lab_dtype_name(dst->dtype),
                      lab_shape_str(in, b, sizeof b), lab_dtype_name(in->dtype));
    }
    lua_pop(L, 1);
  }
  push_copy_blocks(L, buf_idx, 1, 0);
  int fin = lua_gettop(L);
  lab_work *w = NULL;
  note_call_site(L);
  int rc = lab_all_gather(g, buf, in, async ? &w : NULL);
  return done(L, rc, w, async, 1, fin);
}

/* Checks that the list at idx holds n tensors of like's shape and dtype (op, what: for the
 * error), making those missing when create; the list stays where it is. */
static void check_list(lua_State *L, int idx, int n, lab_tensor *like, const char *op, const char *what, int create) {
  char a[128], b[128];
  int len = (int)lua_rawlen(L, idx);
  if (len != n && !(create && len == 0))
    ll_error(L, "%s: %s has %d tensors but the group has %d ranks (one per rank)", op, what, len, n);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    lab_tensor *t = ll_test_tensor(L, -1);
    if (!t && create) {
      ll_push_tensor(L, lab_tensor_empty_on(lab_device_of(like), like->dtype, like->ndim, like->shape));
      lua_rawseti(L, idx, i);
    } else if (!t) {
      ll_error(L, "%s: %s[%d] must be a tensor, got %s", op, what, i, luaL_typename(L, -1));
    } else if (!lab_same_shape(t, like) || t->dtype != like->dtype) {
      ll_error(L, "%s: %s[%d] is %s %s but the tensor is %s %s", op, what, i, lab_shape_str(t, a, sizeof a),
               lab_dtype_name(t->dtype), lab_shape_str(like, b, sizeof b), lab_dtype_name(like->dtype));
    }
    lua_pop(L, 1);
  }
}

/* The list in options field `field` pushed (or a new one when make and the field is absent):
 * its index, or 0 with nothing pushed. Only the root passes it (torch's rule). */
static int opt_root_list(lua_State *L, int opts, const char *field, const char *op, int is_root, int root, lab_group *g) {
  int given = 0;
  if (opts) {
    lua_getfield(L, opts, field);
    given = !lua_isnil(L, -1);
    if (given && !lua_istable(L, -1)) ll_error(L, "%s: %s must be a list of tensors, got %s", op, field, luaL_typename(L, -1));
    if (!given) lua_pop(L, 1);
  }
  if (given && !is_root)
    ll_error(L, "%s: %s is given on rank %d of %s, but only the root (rank %d of the group) passes it", op, field,
             g->rank, g->name, root);
  return given ? lua_gettop(L) : 0;
}

/* An async call's handle (nret = 1 on the stack) and then the result at idx (none: 0), which
 * the handle's wait completes. */
static int async_also(lua_State *L, int nret, int async, int idx) {
  if (!async || !idx) return nret;
  lua_pushvalue(L, idx);
  return nret + 1;
}

/* Gather and scatter check arguments that only some ranks have (the root's list, a list given
 * elsewhere), so a refusal can come from one rank alone, and the others would wait in the
 * collective for a rank that never comes (torch.distributed hangs there). The members first
 * agree, on the check channel, whether any refused: rooted_call runs the binding's body
 * protected, and the body calls rooted_ready just before the collective; a rank whose body
 * failed before that point takes part in the agreement from rooted_call, then raises its own
 * error, and the others raise one naming the op and the group. */
typedef struct {
  lab_group *g; /* set by the body once known: the members that agree */
  int agreed;   /* the agreement took place (in rooted_ready) */
} rooted_state;

static void rooted_ready(lua_State *L, rooted_state *st, const char *op) {
  int64_t any = 0;
  st->agreed = 1;
  if (!st->g || st->g->rank < 0) return;
  if (lab_dist_agree_max(st->g, 0, &any) < 0) ll_runtime_error(L);
  if (any)
    ll_error(L, "%s: another member of %s refused its arguments (its error says why), so no rank entered the %s", op,
             st->g->name, op);
}

static int rooted_call(lua_State *L, lua_CFunction body) {
  rooted_state st = {0};
  int n = lua_gettop(L);
  lua_pushlightuserdata(L, &st);
  lua_pushcclosure(L, body, 1);
  lua_insert(L, 1);
  if (lua_pcall(L, n, LUA_MULTRET, 0) == LUA_OK) return lua_gettop(L);
  if (!st.agreed && st.g && st.g->rank >= 0) {
    int64_t any = 1;
    lab_dist_agree_max(st.g, 1, &any); /* this rank's refusal: the others raise too */
  }
  return lua_error(L);
}

static rooted_state *rooted_of(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* gather(t, dst[, {gather_list=, group=, async=}]) -> on dst, the list of every rank's t in rank
 * order (gather_list filled, else a new list); nothing elsewhere (torch.distributed.gather) */
static int gather_body(lua_State *L) {
  rooted_state *st = rooted_of(L);
  lab_group *g = st->g = ll_opt_group(L, ll_options_index(L)); /* first: every later refusal is agreed on */
  lab_tensor *in = ll_check_tensor(L, 1);
  int dst, async, opts = rooted_args(L, 2, "gather", "dst", &dst, &async);
  int is_root = g->rank >= 0 && g->rank == dst;
  int list = opt_root_list(L, opts, "gather_list", "gather", is_root, dst, g), fin = 0;
  lab_tensor *buf = NULL;
  if (is_root) {
    if (!list) {
      lua_newtable(L);
      list = lua_gettop(L);
    }
    check_list(L, list, g->size, in, "gather", "gather_list", 1);
    buf = blocks_like(L, in, g->size);
    push_copy_blocks(L, lua_gettop(L), list, 0); /* the blocks into the list, once done */
    fin = lua_gettop(L);
  }
  lab_work *w = NULL;
  note_call_site(L);
  if (lab_gather_check(g, buf, in, dst) < 0) ll_runtime_error(L);
  rooted_ready(L, st, "gather");
  int rc = lab_gather(g, buf, in, dst, async ? &w : NULL);
  return async_also(L, done(L, rc, w, async, list, fin), async, list);
}

static int l_gather(lua_State *L) { return rooted_call(L, gather_body); }

/* scatter(list_or_tensor, src[, {scatter_list=, group=, async=}]) -> this rank's block: on src
 * the list of one tensor per rank (or t with {scatter_list = list}, torch's form), elsewhere
 * the tensor that receives it (torch.distributed.scatter) */
static int scatter_body(lua_State *L) {
  rooted_state *st = rooted_of(L);
  lab_group *g = st->g = ll_opt_group(L, ll_options_index(L)); /* first: every later refusal is agreed on */
  int src, async, opts = rooted_args(L, 2, "scatter", "src", &src, &async);
  int is_root = g->rank >= 0 && g->rank == src;
  lab_tensor *out = ll_test_tensor(L, 1);
  int list = out ? opt_root_list(L, opts, "scatter_list", "scatter", is_root, src, g) : 0;
  if (!out) {
    if (!lua_istable(L, 1))
      return ll_error(L, "scatter: argument #1 must be a tensor or (on src) a list of tensors, got %s", luaL_typename(L, 1));
    if (!is_root)
      return ll_error(L, "scatter: rank %d of %s is not src (rank %d of the group): it passes the tensor that receives "
                      "its block, not a list", g->rank, g->name, src);
    list = 1;
    lua_rawgeti(L, 1, 1);
    lab_tensor *first = ll_test_tensor(L, -1);
    if (!first) return ll_error(L, "scatter: the list's first element must be a tensor, got %s", luaL_typename(L, -1));
    out = lab_tensor_empty_on(lab_device_of(first), first->dtype, first->ndim, first->shape);
    if (!out) return ll_runtime_error(L);
    ll_push_tensor(L, out);
  }
  int ret = out == ll_test_tensor(L, 1) ? 1 : lua_gettop(L);
  lab_tensor *in = NULL;
  if (is_root) {
    if (!list) return ll_error(L, "scatter: src (rank %d of %s) needs scatter_list, one tensor per rank", src, g->name);
    check_list(L, list, g->size, out, "scatter", "scatter_list", 0);
    in = blocks_like(L, out, g->size);
    push_copy_blocks(L, lua_gettop(L), list, 1);
    lua_call(L, 0, 0);
  }
  lab_work *w = NULL;
  note_call_site(L);
  if (lab_scatter_check(g, out, in, src) < 0) ll_runtime_error(L);
  rooted_ready(L, st, "scatter");
  int rc = lab_scatter(g, out, in, src, async ? &w : NULL);
  return async_also(L, done(L, rc, w, async, ret, 0), async, ret);
}

static int l_scatter(lua_State *L) { return rooted_call(L, scatter_body); }

/* reduce_scatter(out, in_tensor_or_list[, op][, opts]) */
static int l_reduce_scatter(lua_State *L) {
  lab_tensor *out = ll_check_tensor(L, 1);
  int opts = ll_options_index(L);
  no_extra_args(L, 3, opts, "reduce_scatter");
  lab_redop op = opt_redop(L, 3, opts, "reduce_scatter");
  int async = opt_async(L, opts);
  lab_tensor *in = ll_test_tensor(L, 2);
  if (!in) { /* a list: concatenate it first */
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushcfunction(L, ll_cat);
    lua_newtable(L);
    int n = (int)lua_rawlen(L, 2);
    for (int i = 1; i <= n; i++) {
      lua_rawgeti(L, 2, i);
      lab_tensor *p = ll_check_tensor(L, -1);
      int64_t flat = lab_numel(p);
      lua_pop(L, 1);
      ll_push_tensor(L, lab_reshape(p, 1, &flat));
      lua_rawseti(L, -2, i);
    }
    lua_call(L, 1, 1);
    lua_replace(L, 2);
    in = ll_check_tensor(L, 2);
  }
  lab_work *w = NULL;
  note_call_site(L);
  int rc = lab_reduce_scatter(ll_opt_group(L, opts), out, in, op, async ? &w : NULL);
  return done(L, rc, w, async, 1, 0);
}

/* Split sizes from options field `field`: a list of one non-negative integer per rank of g,
 * in a buffer Lua owns (pushed on the stack); NULL when the field is absent. */
const int64_t *ll_opt_splits(lua_State *L, int opts, const char *field, struct lab_group *g) {
  if (!opts) return NULL;
  lua_getfield(L, opts, field);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return NULL;
  }
  if (!lua_istable(L, -1)) ll_error(L, "all_to_all_single: %s must be a list of %d row counts, got %s", field, g->size, luaL_typename(L, -1));
  int n = (int)lua_rawlen(L, -1);
  if (n != g->size)
    ll_error(L, "all_to_all_single: %s has %d entries but %s has %d ranks (one split per rank)", field, n, g->name, g->size);
  int64_t *s = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n ? n : 1), 0);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, -2, i + 1);
    int isnum = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    if (!isnum || v < 0)
      ll_error(L, "all_to_all_single: %s[%d] is %s; split sizes are non-negative integers", field, i + 1, luaL_tolstring(L, -1, NULL));
    s[i] = v;
    lua_pop(L, 1);
  }
  lua_remove(L, -2); /* the list; the buffer stays on the stack while the call runs */
  return s;
}

/* all_to_all_single(out, in[, {output_split_sizes=, input_split_sizes=, group=, async=}]):
 * rows of in go to the ranks in order, input_split_sizes[i] of them to rank i; out receives
 * output_split_sizes[j] rows from rank j. Without split sizes, an even split. */
static int l_all_to_all_single(lua_State *L) {
  lab_tensor *out = ll_check_tensor(L, 1), *in = ll_check_tensor(L, 2);
  int opts = ll_options_index(L);
  no_extra_args(L, 2, opts, "all_to_all_single");
  int async = opt_async(L, opts);
  lab_group *g = ll_opt_group(L, opts);
  if (g->rank < 0) return ll_error(L, "all_to_all_single: this rank is not a member of %s", g->name);
  const int64_t *os = ll_opt_splits(L, opts, "output_split_sizes", g);
  const int64_t *is = ll_opt_splits(L, opts, "input_split_sizes", g);
  lab_work *w = NULL;
  note_call_site(L);
  int rc = lab_all_to_all_single(g, out, os, in, is, async ? &w : NULL);
  return done(L, rc, w, async, 1, 0);
}

static int p2p(lua_State *L, int is_send, int force_async) {
  lab_tensor *t = ll_check_tensor(L, 1);
  const char *op = is_send ? (force_async ? "isend" : "send") : (force_async ? "irecv" : "recv");
  int peer = ll_check_int(L, 2, op, "peer");
  int opts = ll_options_index(L);
  no_extra_args(L, 2, opts, op);
  peer = chunk_root(L, opts, peer, op, "peer");
  int tag = ll_opt_int_field(L, opts, "tag", 0, op);
  int async = force_async || opt_async(L, opts);
  lab_group *g = ll_opt_group(L, opts);
  lab_work *w = NULL;
  note_call_site(L);
  int rc = is_send ? lab_send(g, t, peer, tag, async ? &w : NULL) : lab_recv(g, t, peer, tag, async ? &w : NULL);
  return done(L, rc, w, async, 1, 0);
}

static int l_send(lua_State *L) { return p2p(L, 1, 0); }
static int l_recv(lua_State *L) { return p2p(L, 0, 0); }
static int l_isend(lua_State *L) { return p2p(L, 1, 1); }
static int l_irecv(lua_State *L) { return p2p(L, 0, 1); }

static int l_barrier(lua_State *L) {
  int opts = ll_options_index(L);
  lab_group *g = opts ? ll_opt_group(L, opts) : (lua_isnoneornil(L, 1) ? lab_dist_default() : ll_check_group(L, 1));
  note_call_site(L);
  ll_check_rc(L, lab_barrier(g));
  return 0;
}

static const luaL_Reg dist_funcs[] = {
    {"barrier", l_barrier},
    {"all_reduce", l_all_reduce},
    {"broadcast", l_broadcast},
    {"reduce", l_reduce},
    {"all_gather", l_all_gather},
    {"all_gather_into_tensor", l_all_gather_into_tensor},
    {"reduce_scatter", l_reduce_scatter},
    {"reduce_scatter_tensor", l_reduce_scatter},
    {"all_to_all", l_all_to_all},
    {"all_to_all_single", l_all_to_all_single},
    {"gather", l_gather},
    {"scatter", l_scatter},
    {"send", l_send},
    {"recv", l_recv},
    {"isend", l_isend},
    {"irecv", l_irecv},
    {NULL, NULL}};

void ll_register_dist(lua_State *L) {
  static const luaL_Reg work_meta[] = {{"__gc", w_gc}, {"__close", w_gc}, {NULL, NULL}};
  static const luaL_Reg work_methods[] = {{"wait", w_wait}, {"test", w_test}, {NULL, NULL}};
  ll_new_class(L, WORK_MT, work_meta, work_methods);

  lua_newtable(L);
  luaL_setfuncs(L, dist_funcs, 0);
  ll_dist_group_funcs(L); /* groups and facts (l_dist_group.c) */
  lua_setfield(L, -2, "dist");
}
