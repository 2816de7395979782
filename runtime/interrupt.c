/* The interrupt flag: a word read with acquire loads, wherever it lives. */
#include "interrupt.h"

static volatile int local_flag;
static volatile int *flag = &local_flag;

void lab_interrupt_attach(volatile int *f) { flag = f ? f : &local_flag; }
int lab_interrupt_requested(void) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }
void lab_interrupt_request(void) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
void lab_interrupt_clear(void) { __atomic_store_n(flag, 0, __ATOMIC_RELEASE); }
