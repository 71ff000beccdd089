// Whether the CPU kernels use Intel AMX tiles for many-token matmuls (prompt processing).
#pragma once

#include <string>

namespace iwb {

// "used (int8, bf16)" or "not used (<reason>)": the CPU has no AMX, the kernel refused the
// tile data state (with its errno text), IWB_CPU_NO_AMX=1 disables it, ... Asked once.
std::string cpu_amx_status();

}  // namespace iwb
