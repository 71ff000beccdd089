// Recording a quantization-lab run in the results store (see recorded_run.h).
#include "recorded_run.h"

#include <cstdio>

namespace iwb::cli {

bool start_recorded_run(const char* command, const std::string& db, quant::QuantRun* run,
                        std::unique_ptr<ResultsStore>* store) {
  auto opened = ResultsStore::open(db);
  if (!opened) {
    std::fprintf(stderr, "iwb %s: %s (use --no-store to skip recording)\n", command, opened.error_message().c_str());
    return false;
  }
  *store = std::move(*opened);
  auto id = (*store)->add_quant_run(*run);
  if (!id) {
    std::fprintf(stderr, "iwb %s: %s\n", command, id.error_message().c_str());
    return false;
  }
  run->id = *id;
  return true;
}

}  // namespace iwb::cli
