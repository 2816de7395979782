/* Fibers for the SIMT interpreter: a stack and a saved stack pointer, switched by a few
 * instructions (x86-64) or swapcontext elsewhere. Under AddressSanitizer every switch is
 * announced (__sanitizer_start/finish_switch_fiber) so ASan follows the stacks. */
#ifndef LAB_KERNELS_SIMT_FIBER_H
#define LAB_KERNELS_SIMT_FIBER_H

#include <stddef.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

typedef struct lab_fiber {
  void *sp; /* saved stack pointer (x86-64) */
#if !defined(__x86_64__)
  ucontext_t uc;
#endif
  char *stack; /* NULL for an OS thread's own stack */
  size_t stack_size;
  void *asan_fake;                  /* ASan's fake-stack handle while switched away */
  const void *asan_bottom;          /* an OS thread's stack as ASan reported it */
  size_t asan_size;
} lab_fiber;

/* prepares f (stack already set) to run fn() on its first switch; fn must never return */
void lab_fiber_init(lab_fiber *f, void (*fn)(void));
/* saves the running context in from and resumes to */
void lab_fiber_switch(lab_fiber *from, lab_fiber *to);


/* the first call a new fiber makes (ASan learns the OS stack it came from: os) */
void lab_fiber_started(lab_fiber *self, lab_fiber *os);
/* a last switch away from a fiber that will never run again */
void lab_fiber_exit_to(lab_fiber *from, lab_fiber *to);

#endif
