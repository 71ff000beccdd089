// Recording a quantization-lab run (iwb quantize, iwb eval) in the results store: the run is
// written as running before the work starts, so a failure part-way leaves a failed row.
#pragma once

#include "iwb/engine/quant/quant_run.h"
#include "iwb/engine/store/results_store.h"

#include <memory>
#include <string>

namespace iwb::cli {

// Opens the store at `db` into `*store` and adds `*run` as running, setting run->id. False
// after printing why to stderr, prefixed "iwb COMMAND: ".
bool start_recorded_run(const char* command, const std::string& db, quant::QuantRun* run,
                        std::unique_ptr<ResultsStore>* store);

}  // namespace iwb::cli
