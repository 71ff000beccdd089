// Opening the results store for a recorded command (iwb quantize, iwb eval); the run's life
// in it (running, then done or failed) is the engine's: quant/run_recorder.h.
#pragma once

#include "iwb/engine/store/results_store.h"

#include <memory>
#include <string>

namespace iwb::cli {

// Opens the store at `db` into `*store`. False after printing why to stderr, prefixed
// "iwb COMMAND: ".
bool open_results_store(const char* command, const std::string& db, std::unique_ptr<ResultsStore>* store);

}  // namespace iwb::cli
