/* The runtime's public face: the one runtime header lua/ and shell/ include (the role lua.h
 * plays for Lua). Everything below it is the runtime's own business; scripts/check_layers.lua
 * (ctest `layers`) fails when lua/ or shell/ include any other runtime header. Grouped by what
 * the layers above use:
 *   tensors     the tensor, its storage and devices (the CUDA plugin loader too), creation,
 *               element-wise, reductions, matmul
 *   autograd    grad mode, the nodes the bindings build, the f/g collectives
 *   dist        groups and collectives, the control channel and board the REPL drives
 *   files       checkpoints, .npy, safetensors, JSON
 *   support     checksums, errors, threads, kernel profile, optimizer steps, formatting */
#ifndef LAB_RUNTIME_LAB_H
#define LAB_RUNTIME_LAB_H

/* tensors */
#include "cuda/loader.h"
#include "device.h"
#include "ewise.h"
#include "join.h"
#include "matmul.h"
#include "random.h"
#include "reduce.h"
#include "size.h"
#include "storage.h"
#include "tensor.h"
#include "transfer.h"

/* autograd */
#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/ops_dist.h"

/* dist */
#include "dist/board.h"
#include "dist/clock.h"
#include "dist/control.h"
#include "dist/control_relay.h"
#include "dist/devcomm.h"
#include "dist/dist.h"
#include "dist/world.h"

/* files */
#include "ckpt_io.h"
#include "ckpt_writer.h"
#include "json.h"
#include "npy.h"
#include "safetensors.h"

/* support */
#include "checksum.h"
#include "error.h"
#include "format.h"
#include "kprof.h"
#include "optim.h"
#include "threads.h"

#endif
