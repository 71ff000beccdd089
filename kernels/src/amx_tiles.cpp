// The per-thread AMX tile configuration (see amx_tiles.h).
#include "quant_dot.h"

#if defined(__x86_64__)
#include "amx_tiles.h"

namespace iwb::detail::amx {

namespace {
// 0: nothing loaded by us on this thread (a fresh thread starts with tiles unconfigured).
thread_local uint32_t loaded_key = 0;
}  // namespace

__attribute__((target("amx-tile"))) void ensure_tile_config(uint32_t key, const TileConfig& config) {
  if (loaded_key == key) return;
  _tile_loadconfig(&config);
  loaded_key = key;
}

}  // namespace iwb::detail::amx

#endif
