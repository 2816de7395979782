/* The interrupt flag that long loops poll (Ctrl-C, or a stepper's quit). It lives here, below
 * everything that computes, so iterators and matrix products can stop early without knowing
 * where the flag comes from: the activity board (runtime/dist/board.c) attaches its
 * node-wide shared flag at start-up; until then a process-local flag serves. */
#ifndef LAB_RUNTIME_INTERRUPT_H
#define LAB_RUNTIME_INTERRUPT_H

/* Point the flag at a word another layer owns (NULL: back to the process-local one). */
void lab_interrupt_attach(volatile int *flag);
int lab_interrupt_requested(void);
void lab_interrupt_request(void);
void lab_interrupt_clear(void);

#endif
