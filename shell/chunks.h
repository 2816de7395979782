/* The text of the chunks typed at the prompt. They load as "=stdin", which has no file to
 * read, so without it the stepper could show neither the line it stops at nor `l` for a
 * function defined in an earlier chunk. */
#ifndef LAB_SHELL_CHUNKS_H
#define LAB_SHELL_CHUNKS_H

#include <lua.h>
#include <stddef.h>

/* Keeps the text of the chunk whose loaded function is at stack index fn (the newest
 * CHUNKS_KEPT are kept). */
void chunks_keep(lua_State *L, int fn, const char *text, size_t len);

/* Pushes the text of the chunk that defined the Lua function at stack index fn and returns
 * it, or pushes nothing and returns NULL (not typed at the prompt, or no longer kept). */
const char *chunks_push_text_of(lua_State *L, int fn);

#endif
