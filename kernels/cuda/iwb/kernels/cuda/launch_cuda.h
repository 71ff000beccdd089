// How the kernels of kernels/cuda are launched: programmatic dependent launch on or off.
#pragma once

namespace iwb {

// With it on (Hopper and later), each kernel may start while the one before it in the stream is
// still running: its weights stream into L2 during the other's tail, and launch gaps overlap.
// The kernels stay correct either way (each waits for the grids before it: cuda_common.cuh's
// wait_for_prior_grids). Off by default; the CUDA backend turns it on for devices of compute
// capability 9.0 or more unless IWB_CUDA_PDL=0, and off while it records a profile (each kernel
// then gets its own event pair). One setting for the process: the launches that read it come
// from one engine thread at a time.
void set_cuda_programmatic_launch(bool enabled);
bool cuda_programmatic_launch();

}  // namespace iwb
