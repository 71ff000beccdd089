// Opening the results store for a recorded command (see recorded_run.h).
#include "recorded_run.h"

#include <cstdio>

namespace iwb::cli {

bool open_results_store(const char* command, const std::string& db, std::unique_ptr<ResultsStore>* store) {
  auto opened = ResultsStore::open(db);
  if (!opened) {
    std::fprintf(stderr, "iwb %s: %s (use --no-store to skip recording)\n", command, opened.error_message().c_str());
    return false;
  }
  *store = std::move(*opened);
  return true;
}

}  // namespace iwb::cli
