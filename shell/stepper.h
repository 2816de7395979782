/* The SPMD stepper: every rank runs a script under a line hook and they pause together;
 * rank 0 shows where each rank is (grouped: one line when all agree, per rank when they
 * differ), reads a command and every rank carries it out: n(ext), s(tep into), s! (into the
 * library too), finish, until [N], c(ontinue), b file:line [condition], tbreak, delete [n],
 * up/down [n], l(ist), bt, locals, p expr, display expr / undisplay [n], q(uit).
 * A rank waiting in a collective when another stops joins the pause from inside the wait. */
#ifndef LAB_SHELL_STEPPER_H
#define LAB_SHELL_STEPPER_H

#include <lua.h>
#include <stdio.h>

/* How rank 0 reads debugger commands and where it writes (set by the REPL or --step). */
void stepper_set_terminal(char *(*read_line)(const char *prompt), FILE *out);

/* Runs "file args..." with `arg` set, stepping from its first line when `stepping`. Output
 * goes to the current stdout. Returns 0 or -1 with *err. */
int stepper_run_script(lua_State *L, const char *cmdline, int stepping, char **err);

/* :step / --step: the whole session on every rank, ending with every rank's outcome. */
int stepper_session(lua_State *L, const char *cmdline, FILE *out); /* -1 when this rank's script failed */

/* While a REPL chunk runs, every rank is armed: when one rank stops (lab.breakpoint()), the
 * others join the pause from a collective wait, from the REPL's hook (stepper_pause_if_asked)
 * or, once done with the chunk, while they wait for the rest (stepper_answer_pauses). */
void stepper_arm(lua_State *L);
void stepper_disarm(void);
void stepper_pause_if_asked(lua_State *L);
void stepper_answer_pauses(void);

/* A plain script (llmlab script.lua, -e code): every rank is armed for the whole run and its
 * collectives wait guarded, so that a lab.breakpoint() that only some ranks reach stops them
 * all (the others join from a collective, or when done with the script); stepper_batch_done
 * waits until every rank is done, answering pauses meanwhile, and returns 1 when timeout_s > 0
 * expired first (the caller then aborts the job). */
void stepper_arm_batch(lua_State *L);
int stepper_batch_done(double timeout_s);

/* registers lab.breakpoint() */
void stepper_register(lua_State *L);

/* 1 while the stepper runs the script after `c`: then Ctrl-C
 * breaks into (step) on every rank instead of ending the run, as in pdb */
int stepper_breaks_on_interrupt(void);
/* what that Ctrl-C does: every rank pauses (at once, or once the exchange of `c` is over) */
void stepper_request_break(void);

#endif
