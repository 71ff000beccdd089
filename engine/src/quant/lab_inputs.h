// What the lab's queue reads and derives before its first run (quant_lab.cpp's helpers): the
// texts, the base model, the files' names, and progress shares that never go back.
#pragma once

#include "iwb/engine/quant/quant_lab.h"

#include <string>

namespace iwb::quant::lab {

struct Texts {
  std::string eval, eval_name;                // name: "built-in" or the file's name
  std::string calibration, calibration_name;  // the evaluation text when none is given
};
Result<Texts> read_texts(const LabSettings& settings);

// The F16 copy of a quantized source, or the source itself when it holds float weights.
struct Base {
  std::string path;
  std::string note;                // says the base is a dequantized copy; empty otherwise
  bool needs_dequantize = false;   // the F16 copy is not on disk yet
};
Result<Base> plan_base(const LabSettings& settings);
// The base's own type for its rows ("F32", "F16"); "F16" when the file does not say.
std::string base_weight_type(const std::string& base_path);

// Files the queue writes in settings.output_dir, named after the source.
std::string imatrix_path(const LabSettings& settings, const std::string& calibration_text);
std::string quantized_path(const LabSettings& settings, const LabItem& item);

// Progress over the whole queue: every step (base, reference, imatrix, each item) is an equal
// share; a report inside a step gives the fraction of that step done. Fractions never go back,
// whatever order the work inside a step reports in.
class ProgressShares {
 public:
  ProgressShares(const LabObserver& observer, int num_steps) : m_observer(observer), m_num_steps(num_steps) {}
  void report(LabStage stage, int item, double within_step, std::string message);
  void next_step() { ++m_step; }
  void finish(bool was_cancelled);

 private:
  const LabObserver& m_observer;
  int m_num_steps;
  int m_step = 0;
  double m_last = 0;
};

}  // namespace iwb::quant::lab
