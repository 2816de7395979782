/* The runtime's public face: the one runtime header lua/ includes (the role lua.h plays for
 * Lua), and with runtime/lab_control.h all that shell/ includes. Everything else under runtime/
 * (the board and control channel, device communicators, the CUDA plugin loader, backends, the
 * kernels' own headers) is the runtime's own business; scripts/check_layers.lua (ctest
 * `layers`) fails when lua/ or shell/ include any other runtime or kernels/ header. Grouped by
 * what the bindings use:
 *   tensors     the tensor, its storage and devices, creation, element-wise, reductions, matmul
 *   autograd    grad mode, the nodes the bindings build, the f/g collectives
 *   dist        groups and collectives (dist.h, with its clock and the wait policy of group.h),
 *               this rank's place in the job
 *   files       checkpoints, .npy, safetensors, JSON
 *   support     checksums and bit faults, errors, threads, kernel profile, optimizer steps,
 *               formatting, the executable's directory, the sim interpreter's records */
#ifndef LAB_RUNTIME_LAB_H
#define LAB_RUNTIME_LAB_H

/* tensors */
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
#include "dist/clock.h"
#include "dist/dist.h"
#include "dist/place.h"

/* files */
#include "ckpt_io.h"
#include "ckpt_writer.h"
#include "json.h"
#include "npy.h"
#include "safetensors.h"

/* support */
#include "bits.h"
#include "checksum.h"
#include "error.h"
#include "exe_dir.h"
#include "format.h"
#include "kprof.h"
#include "optim.h"
#include "sim_stats.h"
#include "threads.h"

#endif
