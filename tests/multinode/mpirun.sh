#!/bin/bash
# mpirun across the simulated hosts that hosts.sh set up (MN_STATE names them): give it as
# LLMLAB_MPIRUN and `llmlab -n N` runs its ranks across them, exactly as it would across
# machines with a hostfile.
source "$(dirname "${BASH_SOURCE[0]}")/hosts.sh"
mn_mpirun "$@"
