/* What the two files of lab.dist share: l_dist.c (collectives and work handles) and
 * l_dist_group.c (groups and facts). */
#ifndef LAB_LUA_L_DIST_H
#define LAB_LUA_L_DIST_H

#include <lua.h>

struct lab_group;

/* the group userdata at idx (raises when it is not one, or was destroyed) */
struct lab_group *ll_check_group(lua_State *L, int idx);
/* the group functions and facts of lab.dist into the table at -1, and the group metatable */
void ll_dist_group_funcs(lua_State *L);

#endif
