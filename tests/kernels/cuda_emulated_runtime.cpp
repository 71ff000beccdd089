// The rest of kernels/cuda compiled as host C++ against cuda_emulation_warps/ for the emulated
// CUDA engine (iwb_engine_emulated, engine/CMakeLists.txt): the process's programmatic-launch
// setting and the f32 dequantization kernels (the other sources come with the kernel tests'
// cuda_emulated_*.cpp).
#include "dequantize.cu"
#include "launch.cu"
