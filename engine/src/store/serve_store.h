// The results store's `iwb bench-serve` tables (schema v6; serve_store.cpp), used by
// results_store.cpp's migration and open().
#pragma once

#include "iwb/engine/status.h"

struct sqlite3;

namespace iwb {

// serve_runs (one row per run: settings, status, who writes it) and serve_points (one row per
// load point: the summary figures as columns, everything else as JSON).
const char* serve_schema_sql();

// Runs left "running" by a process that is gone become "interrupted". A run records its
// writer's pid, the kernel's boot id and the process start time (from /proc), so a live writer
// (another `iwb bench-serve` or the application) is never mistaken for a dead one, nor a reused
// pid for the writer; where /proc cannot tell, the run is left as it is.
Status mark_abandoned_serve_runs(sqlite3* db);

}  // namespace iwb
