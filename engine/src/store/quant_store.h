// The results store's quantization-lab tables (quant_store.cpp), as results_store.cpp's open()
// uses them.
#pragma once

#include "iwb/engine/status.h"

struct sqlite3;

namespace iwb {

// Lab runs left "running" by a process that is gone (killed, crashed) become "interrupted".
Status mark_abandoned_quant_runs(sqlite3* db);

}  // namespace iwb
