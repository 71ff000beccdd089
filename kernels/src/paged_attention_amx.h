// Prompt attention on AMX tiles (private to kernels/src; paged_attention_amx.cpp): the tiled
// kernel's plan (runs of consecutive query tokens of one sequence, all query heads of one KV
// head together, key tiles with an online softmax) with the two matrix products per tile,
// scores Q.K^T and values P.V, as bf16 tile products accumulated in f32 (tdpbf16ps).
#pragma once

#include "iwb/kernels/paged_attention.h"

namespace iwb::detail {

// False (writing nothing) unless the CPU's AVX-512 path may use AMX-BF16 (has_amx_bf16) and
// IWB_ATTENTION_AMX is not 0, with head_dim a multiple of 32 and head_dim_v of 16 (both at most
// 512); the caller then runs the tiled kernel. Any cache type; arguments must already be valid.
bool paged_attention_amx(const PagedAttentionArgs& args);

}  // namespace iwb::detail
