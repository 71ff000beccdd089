// The per-thread AMX tile configuration (see amx_tiles.h).
#include "quant_dot.h"

#if defined(__x86_64__)
#include "amx_tiles.h"

namespace iwb::detail::amx {

// Loaded on every call, not cached per thread: an ASan run once died of SIGILL in an AMX GEMM
// on a pool worker whose cached key said the configuration was loaded (cause not found; a
// configuration the kernel reset to its initial state would explain it). One ldtilecfg per
// call of a GEMM panel costs nothing measurable next to the panel's tile work.
__attribute__((target("amx-tile"))) void ensure_tile_config(uint32_t, const TileConfig& config) {
  _tile_loadconfig(&config);
}

}  // namespace iwb::detail::amx

#endif
