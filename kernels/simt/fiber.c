/* Fiber switching (fiber.h): on x86-64 the callee-saved registers are pushed on the old stack
 * and popped from the new one, a few nanoseconds where swapcontext makes a system call per
 * switch; other architectures use ucontext. MXCSR and the x87 control word are not switched:
 * kernels never change them (ldmxcsr and fldcw cost more than the rest of the switch). */
#include "fiber.h"

#include <stdint.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define LAB_ASAN 1
#endif

/* A fiber's stack is reused by the next block's threads; frames a fiber left without
 * returning (it ends by switching away) keep ASan's redzones poisoned: clear them. */
static void fresh_stack(lab_fiber *f) {
#ifdef LAB_ASAN
  __asan_unpoison_memory_region(f->stack, f->stack_size);
#else
  (void)f;
#endif
}

#if defined(__x86_64__)
void lab_fiber_swap_sp(void **save, void *next);
__asm__(".text\n"
        ".globl lab_fiber_swap_sp\n"
        ".type lab_fiber_swap_sp,@function\n"
        "lab_fiber_swap_sp:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size lab_fiber_swap_sp, .-lab_fiber_swap_sp\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");

void lab_fiber_init(lab_fiber *f, void (*fn)(void)) {
  fresh_stack(f);
  /* stacks are 64 KiB apart, so their tops would share the same L1 sets: each starts at its
   * own offset within 4 KiB (fibers of one block run in turn, touching each top) */
  uintptr_t color = ((uintptr_t)f->stack / f->stack_size * 320) & 4095;
  uintptr_t top = ((uintptr_t)f->stack + f->stack_size - color) & ~(uintptr_t)15;
  uint64_t *sp = (uint64_t *)top;
  *--sp = 0;                 /* fn's frame: as if called (rsp = 8 mod 16 at entry) */
  *--sp = (uint64_t)(uintptr_t)fn; /* ret target */
  for (int i = 0; i < 6; i++) *--sp = 0; /* rbp rbx r12-r15 */
  f->sp = sp;
}

static void raw_switch(lab_fiber *from, lab_fiber *to) { lab_fiber_swap_sp(&from->sp, to->sp); }
#else
void lab_fiber_init(lab_fiber *f, void (*fn)(void)) {
  fresh_stack(f);
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack;
  f->uc.uc_stack.ss_size = f->stack_size;
  f->uc.uc_link = NULL;
  makecontext(&f->uc, fn, 0);
}
static void raw_switch(lab_fiber *from, lab_fiber *to) { swapcontext(&from->uc, &to->uc); }
#endif

void lab_fiber_switch(lab_fiber *from, lab_fiber *to) {
#ifdef LAB_ASAN
  const void *bottom = to->stack ? to->stack : to->asan_bottom;
  size_t size = to->stack ? to->stack_size : to->asan_size;
  __sanitizer_start_switch_fiber(&from->asan_fake, bottom, size);
  raw_switch(from, to);
  /* back on from's stack: learn the bounds of the stack we came from if it is an OS thread's */
  const void *old_bottom;
  size_t old_size;
  __sanitizer_finish_switch_fiber(from->asan_fake, &old_bottom, &old_size);
  (void)old_bottom, (void)old_size;
#else
  raw_switch(from, to);
#endif
}

/* a fiber's first instructions, before fn: the ASan half of the first switch */
void lab_fiber_started(lab_fiber *self_from_os, lab_fiber *os) {
#ifdef LAB_ASAN
  (void)self_from_os;
  __sanitizer_finish_switch_fiber(NULL, &os->asan_bottom, &os->asan_size);
#else
  (void)self_from_os, (void)os;
#endif
}

void lab_fiber_exit_to(lab_fiber *from, lab_fiber *to) {
#ifdef LAB_ASAN
  __sanitizer_start_switch_fiber(NULL, to->stack ? to->stack : to->asan_bottom,
                                 to->stack ? to->stack_size : to->asan_size);
#endif
  raw_switch(from, to);
}
