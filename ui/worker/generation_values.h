// Plain values that cross the thread boundary between the chat panel and the engine worker:
// sampling settings, a conversation snapshot to answer, per-reply statistics and a summary of
// the loaded model. Copyable, registered as meta-types, and (where stored) JSON-convertible.
#pragma once

#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/sampler.h"

#include <QJsonObject>
#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

namespace iwb::ui {

// What the user sets in the sampling panel; stored per conversation as JSON.
struct SamplingSettings {
  double temperature = 0.7;
  int topK = 40;
  double topP = 0.95;
  double minP = 0.05;
  double repeatPenalty = 1.1;
  qint64 seed = -1;     // < 0: a new random seed for every reply
  int maxTokens = 512;  // <= 0: until the model ends its turn or the context is full
  // Structured output, named as OpenAI's response_format types: "text" (free), "json_object"
  // (any JSON object) or "json_schema" (replies fit `jsonSchema`); or "regex" (vLLM's
  // guided_regex: a reply's whole text matches `regex`).
  QString replyFormat = QStringLiteral("text");
  QString jsonSchema;  // a JSON Schema document; kept while another format is chosen
  QString regex;       // a regex (ECMA-262 syntax); kept the same way
  // Thinking, as vLLM's and llama-server's chat_template_kwargs switch it: "on" or "off"
  // (enable_thinking: Qwen3's, Qwen3.5's, SmolLM3's, GLM's and Gemma 4's templates), empty for
  // the template's default; and reasoning_effort "low", "medium" or "high" (gpt-oss's), empty
  // for the template's default.
  QString thinking;
  QString reasoningEffort;

  QJsonObject toJson() const;
  // Missing or out-of-range fields keep their defaults, so an old or hand-edited row still loads.
  static SamplingSettings fromJson(const QJsonObject& json);
  // `randomSeed` is used when `seed` asks for a random one.
  iwb::SamplingParams toSamplingParams(quint64 randomSeed) const;
  // The grammar replies are held to: null for text; an error names what is wrong with the schema.
  iwb::Result<std::shared_ptr<const iwb::JsonGrammar>> replyGrammar() const;

  friend bool operator==(const SamplingSettings&, const SamplingSettings&) = default;
};

struct ChatTurn {
  QString role;  // "system", "user" or "assistant"
  QString content;
};

// Everything the worker needs to answer a conversation; a copy, never a pointer into the GUI.
struct GenerationInput {
  QList<ChatTurn> messages;  // optional system turn first, ends with a user turn
  SamplingSettings sampling;
  QString templateOverride;  // empty or "auto": the model's own template; else a family name
  int numDraftTokens = -1;   // speculative decoding: -1 the engine's setting, 0 off (a baseline), K
  // >= 0: the oldest turns after the system turn are left out of the prompt until the prompt
  // and this many reply tokens fit the context (the user chose to shorten the conversation).
  int fitReserveTokens = -1;
  // >= 0: each token's probability and this many most likely alternatives (View > Token
  // Probabilities); -1 none, and nothing computed.
  int numTopAlternatives = -1;
};

// Why the model said a token: its probability and the most likely tokens at its position, from
// the raw logits (before sampling's penalties, filters and temperature).
struct TokenAlternative {
  QString text;
  double probability = 0;
};
struct TokenProbability {
  double probability = 0;                // of the token chosen
  QList<TokenAlternative> alternatives;  // most likely first
};

// Several prompts answered together (the KV Cache tab's batch): each prompt becomes a request
// of its own, all queued before the engine's next step so they are served in one batch.
struct BatchInput {
  QStringList prompts;  // one user message each
  QString systemText;   // when set, a system turn before every prompt: a common prefix
  SamplingSettings sampling;
  QString templateOverride;  // as in GenerationInput
  int numDraftTokens = -1;   // as in GenerationInput

  // The conversation of prompt `i`: the system turn (when set) and the user's prompt.
  GenerationInput inputFor(qsizetype i) const;
};

// How one reply went. Stored with the message as JSON and shown under it.
struct GenerationStats {
  QString finishReason;  // iwb::finish_reason_name(): "end of generation", "aborted", ...
  QString errorMessage;  // when finishReason is "error"
  int numPromptTokens = 0;
  int numGeneratedTokens = 0;
  double timeToFirstTokenSeconds = 0;
  double generationSeconds = 0;  // first to last generated token
  quint64 seed = 0;              // the seed the sampler used
  // Where the reply was generated: "local" (this program's engine) or a remote endpoint and
  // model, "gpu-box:8000 · Qwen3-8B"; empty in replies stored before it was recorded.
  QString ranOn;

  bool isValid() const { return !finishReason.isEmpty(); }
  bool isError() const;
  bool isAborted() const;
  // Decode speed: tokens after the first over the time they took (the first one's time is
  // the prompt's). 0 when there is nothing to measure.
  double tokensPerSecond() const;
  // "TTFT 0.12 s · 41.3 tok/s · 128 tokens · end of generation", after where it ran when that
  // is known ("gpu-box:8000 · Qwen3-8B · TTFT ...").
  QString summaryLine() const;

  QJsonObject toJson() const;
  static GenerationStats fromJson(const QJsonObject& json);
};

struct EngineLoadOptions {
  qint64 contextLength = 0;  // 0: the engine's default (the trained context, at most 4096)
  int numThreads = 0;        // 0: all cores
  // The paged KV cache: memory it may take (0: the engine's default budget) and positions per
  // block (0: the engine's default, 16).
  qint64 kvCacheMiB = 0;
  int kvBlockSize = 0;
  qint64 maxBatchTokens = 0;  // tokens per step; 0: the engine's default
  // Exact matmuls whose results do not depend on the batch (EngineOptions::is_batch_invariant).
  bool isBatchInvariant = false;
  // Where the model runs (EngineOptions::device): "auto" (a CUDA device when one works, else
  // the CPU), "cpu" or "cuda:N".
  QString device = QStringLiteral("auto");
  // On a CUDA device, the share (0..1] of the free device memory the KV pool may take
  // (EngineOptions::kv_cache_fraction); 0: the engine's default. kvCacheMiB wins when set.
  double kvCacheFraction = 0;
  // How the weights come into memory (EngineOptions::load_mode, llama.cpp's --load-mode):
  // "auto" (read into memory on the CPU where it fits: faster decode), "mmap" or "none".
  QString loadMode = QStringLiteral("auto");
};

// The loaded model as the GUI sees it.
struct LoadedModel {
  QString path;
  QString name;
  QString architecture;
  qint64 contextLength = 0;
  int numThreads = 0;
  bool hasChatTemplate = false;
  QString detectedTemplate;      // family name the model's template was recognised as ("plain" if none)
  QString deviceId;              // where the forward pass runs: "cpu", "cuda:0", ... (MemoryReport::device_id)
  QString deviceName;            // the CPU's model name or the GPU's product name
  QString deviceFallbackReason;  // why "auto" runs it on the CPU (no CUDA device, ...); else empty
  double loadSeconds = 0;        // from opening the file to ready (ModelSummary::load_seconds)
  qint64 numMtpLayers = 0;       // multi-token-prediction layers (nextn_predict_layers: the MTP drafter's)
};

// The families the user can pick, by their engine names, in display order.
QStringList chatTemplateFamilyNames();
QString chatTemplateDisplayName(const QString& familyName);

// Registers the types above for queued connections; safe to call more than once.
void registerGenerationMetaTypes();

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::SamplingSettings)
Q_DECLARE_METATYPE(iwb::ui::GenerationInput)
Q_DECLARE_METATYPE(iwb::ui::GenerationStats)
Q_DECLARE_METATYPE(iwb::ui::TokenProbability)
Q_DECLARE_METATYPE(iwb::ui::BatchInput)
Q_DECLARE_METATYPE(iwb::ui::EngineLoadOptions)
Q_DECLARE_METATYPE(iwb::ui::LoadedModel)
