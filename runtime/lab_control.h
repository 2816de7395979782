/* What the shell needs of the runtime besides lab.h: the control plane rank 0's REPL and the
 * stepper drive (the per-node board of interrupts, pauses, stall reports and live output; the
 * control channel and its relay across hosts; world set-up and tear-down) and, for --version,
 * the CUDA libraries the loader finds. lua/ never includes it (ctest `layers`). */
#ifndef LAB_RUNTIME_LAB_CONTROL_H
#define LAB_RUNTIME_LAB_CONTROL_H

#include "lab.h"

#include "cuda/loader.h"
#include "dist/board.h"
#include "dist/control.h"
#include "dist/control_relay.h"
#include "dist/world.h"

#endif
