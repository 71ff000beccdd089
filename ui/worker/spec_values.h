// Plain values of speculative decoding between the GUI and the engine worker: the settings the
// Speculative tab (and through it the chat) uses, what each step's verification showed, and
// what a finished request achieved (its tokens/s, speculative or a plain baseline).
#pragma once

#include "iwb/engine/spec/spec_config.h"
#include "iwb/engine/spec/spec_stats.h"

#include <QMetaType>
#include <QString>

namespace iwb::ui {

struct SpeculationSettings {
  QString kind = QStringLiteral("none");  // iwb::spec::drafter_kind_name(): none, draft, lookup, self, mtp
  QString draftModelPath;
  int numDraftTokens = 4;
  bool isAdaptive = false;
  double minProbability = 0.0;  // --spec-draft-p-min: a model drafter's least sure guess kept; 0: off
  QString selfDraftType = QStringLiteral("Q4_0");

  bool isEnabled() const { return kind != QLatin1String("none") && !kind.isEmpty(); }
  // The engine's config; an error names the bad field (unknown kind or type).
  iwb::Result<iwb::spec::SpeculativeConfig> toConfig() const;
  friend bool operator==(const SpeculationSettings&, const SpeculationSettings&) = default;
};

// One engine step that verified drafts.
struct SpeculationStep {
  double sessionSeconds = 0;  // when it ended, on the worker's session clock
  iwb::spec::SpeculationStats stats;
};

// A finished request of ours, with its speculation (empty for a baseline or without a drafter).
struct SpeculationReport {
  quint64 requestId = 0;   // the caller's id
  QString drafter;         // the engine's drafter kind at the time ("none" for a baseline)
  int numDraftTokens = 0;  // K asked for (0: plain decoding)
  int numGeneratedTokens = 0;
  double generationSeconds = 0;
  iwb::spec::SpeculationStats stats;

  bool isBaseline() const { return numDraftTokens == 0; }
  double tokensPerSecond() const {
    return generationSeconds > 0 && numGeneratedTokens > 1 ? (numGeneratedTokens - 1) / generationSeconds : 0.0;
  }
};

void registerSpeculationMetaTypes();

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::SpeculationSettings)
Q_DECLARE_METATYPE(iwb::ui::SpeculationStep)
Q_DECLARE_METATYPE(iwb::ui::SpeculationReport)
