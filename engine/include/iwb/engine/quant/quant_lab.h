// The quantization lab's queue as one call, for the application's Quantization tab and any
// headless caller: prepare the base, measure its reference row once, collect the importance
// matrix once, then quantize, evaluate and record every item. Runs on the caller's thread and
// loads one engine at a time there: the caller decides where the lab's compute runs.
#pragma once

#include "iwb/engine/quant/quant_run.h"
#include "iwb/engine/status.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace iwb {
class ResultsStore;
}

namespace iwb::quant {

// One entry of the queue.
struct LabItem {
  std::string type;                   // "Q4_K_M" ...; empty: the base itself (e.g. with the 8-bit KV cache)
  bool is_imatrix = false;            // quantize with the importance matrix
  std::string kv_cache_type = "f16";  // the evaluation's KV cache: "f16", "q8_0", ..., or keys/values "q8_0/q4_0"
};
// "Q4_0 + imatrix, KV q8_0", "base", "base, KV q8_0/q4_0" (keys/values).
std::string lab_item_label(const LabItem& item);

struct LabSettings {
  std::string source_path;            // F32/F16/BF16, or quantized: dequantized to an F16 base first
  std::string output_dir;             // quantized files, the F16 base and the imatrix
  std::string eval_text_path;         // empty: builtin_eval_text()
  std::string calibration_text_path;  // the imatrix's text; empty: the evaluation text
  int64_t context = 512;
  int64_t num_chunks = 4;       // 0: all the text holds
  int64_t num_gen_tokens = 16;  // generation speed test per run; 0: skip
  int64_t gen_depth = 4096;     // the same test after this many tokens in the KV cache (cut to the
                                // model's trained context); 0: skip
  // Capacity per run: how many sequences of fit_context positions fit in fit_memory_bytes beside
  // the weights, from the run's KV bytes per position (kv_sequences_that_fit).
  int64_t fit_context = 8192;
  double fit_memory_bytes = 8.0 * 1024 * 1024 * 1024;
  int num_threads = 0;  // 0: all cores
};

// The queue's stages, in the order they run.
enum class LabStage { Base, Reference, Imatrix, Quantize, Evaluate, Finished };
const char* lab_stage_name(LabStage stage);  // "base", "reference", ...

struct LabProgress {
  LabStage stage = LabStage::Base;
  int item = -1;        // index into the items; -1 before the first and at the end
  double fraction = 0;  // of the whole queue, 0..1, never decreasing
  std::string message;  // for a person: "Q4_0: quantizing blk.3.attn_q.weight"
};

struct LabItemOutcome {
  LabItem item;
  std::string label;                        // lab_item_label(item)
  RunStatus status = RunStatus::Cancelled;  // Cancelled also for items the queue never reached
  int64_t run_id = 0;                       // its row; 0 when it never started
  std::string error;
  bool was_base_cached = false;  // the base's distributions came from the logits cache
};

struct LabReport {
  std::string base_path;              // the source, or its dequantized F16
  std::string base_note;              // what the reference is, when it is a dequantized copy
  LabItemOutcome reference;           // the base measured against itself (label "base")
  bool was_reference_reused = false;  // a done reference row of this base, text and context existed
  bool was_imatrix_cached = false;    // the imatrix file of this base and text existed
  bool was_cancelled = false;
  std::vector<LabItemOutcome> items;  // one per item, in queue order

  int num_done() const;
  int num_failed() const;
  std::string summary() const;  // "3 runs done, 2 failed", ", cancelled" when it was
};

// Called on the thread that runs the queue.
struct LabObserver {
  std::function<void(const LabProgress&)> progress;
  std::function<void(int64_t run_id)> run_recorded;          // a row was added or finished
  std::function<void(const LabItemOutcome&)> item_finished;  // each item, done or not
};

// Runs the queue, recording every run in `store` as kind "lab" (each added as running and
// finished as done, failed or cancelled). One item's failure is its outcome and the queue goes
// on; the error is what stops the whole queue (an unreadable text or source, the base or the
// imatrix failing). `cancel` stops the step in progress at its next check: that run is marked
// cancelled, the items not reached are reported cancelled without rows.
Result<LabReport> run_quant_lab(const LabSettings& settings, const std::vector<LabItem>& items, ResultsStore& store,
                                const LabObserver& observer = {}, const std::atomic<bool>* cancel = nullptr);

}  // namespace iwb::quant
