// JSON forms of the sampling settings and reply statistics, their conversion to the engine's
// SamplingParams, the template family names for pickers, and the meta-type registration.
#include "worker/generation_values.h"

#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/runtime/engine.h"

#include <QCoreApplication>
#include <QHash>
#include <QJsonValue>
#include <QLocale>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

// A number from JSON within [lo, hi], or the fallback when absent, not a number or outside.
double boundedDouble(const QJsonObject& json, const char* key, double lo, double hi, double fallback) {
  const QJsonValue v = json.value(QLatin1String(key));
  if (!v.isDouble()) return fallback;
  const double d = v.toDouble();
  return (std::isfinite(d) && d >= lo && d <= hi) ? d : fallback;
}

}  // namespace

QJsonObject SamplingSettings::toJson() const {
  return QJsonObject{
      {QStringLiteral("temperature"), temperature},
      {QStringLiteral("top_k"), topK},
      {QStringLiteral("top_p"), topP},
      {QStringLiteral("min_p"), minP},
      {QStringLiteral("repeat_penalty"), repeatPenalty},
      // JSON numbers are doubles: a seed beyond 2^53 would lose digits, so it goes as text.
      {QStringLiteral("seed"), QString::number(seed)},
      {QStringLiteral("max_tokens"), maxTokens},
      {QStringLiteral("response_format"), replyFormat},
      {QStringLiteral("json_schema"), jsonSchema},
      {QStringLiteral("regex"), regex},
      {QStringLiteral("thinking"), thinking},
      {QStringLiteral("reasoning_effort"), reasoningEffort},
  };
}

SamplingSettings SamplingSettings::fromJson(const QJsonObject& json) {
  SamplingSettings s;
  s.temperature = boundedDouble(json, "temperature", 0.0, 10.0, s.temperature);
  s.topK = static_cast<int>(boundedDouble(json, "top_k", 0, 1e6, s.topK));
  s.topP = boundedDouble(json, "top_p", 0.0, 1.0, s.topP);
  s.minP = boundedDouble(json, "min_p", 0.0, 1.0, s.minP);
  s.repeatPenalty = boundedDouble(json, "repeat_penalty", 0.0, 10.0, s.repeatPenalty);
  bool isNumber = false;
  const qint64 seed = json.value(QLatin1String("seed")).toString().toLongLong(&isNumber);
  if (isNumber) s.seed = seed;
  s.maxTokens = static_cast<int>(boundedDouble(json, "max_tokens", -1, 1e7, s.maxTokens));
  const QString format = json.value(QLatin1String("response_format")).toString();
  if (format == QLatin1String("json_object") || format == QLatin1String("json_schema") ||
      format == QLatin1String("regex"))
    s.replyFormat = format;
  s.jsonSchema = json.value(QLatin1String("json_schema")).toString();
  s.regex = json.value(QLatin1String("regex")).toString();
  const QString thinking = json.value(QLatin1String("thinking")).toString();
  if (thinking == QLatin1String("on") || thinking == QLatin1String("off")) s.thinking = thinking;
  const QString effort = json.value(QLatin1String("reasoning_effort")).toString();
  if (effort == QLatin1String("low") || effort == QLatin1String("medium") || effort == QLatin1String("high"))
    s.reasoningEffort = effort;
  return s;
}

iwb::Result<std::shared_ptr<const iwb::JsonGrammar>> SamplingSettings::replyGrammar() const {
  if (replyFormat == QLatin1String("json_object")) return iwb::JsonGrammar::any_object();
  if (replyFormat == QLatin1String("regex")) {
    if (regex.isEmpty()) {
      return iwb::make_error(iwb::ErrorCode::InvalidArgument, "the reply format is a regex, but none is written");
    }
    return iwb::JsonGrammar::from_regex(regex.toStdString());
  }
  if (replyFormat != QLatin1String("json_schema")) return std::shared_ptr<const iwb::JsonGrammar>();
  if (jsonSchema.trimmed().isEmpty()) {
    return iwb::make_error(iwb::ErrorCode::InvalidArgument, "the reply format is a JSON schema, but none is written");
  }
  return iwb::JsonGrammar::from_schema(jsonSchema.toStdString());
}

iwb::SamplingParams SamplingSettings::toSamplingParams(quint64 randomSeed) const {
  iwb::SamplingParams p;
  p.temperature = static_cast<float>(temperature);
  p.top_k = topK;
  p.top_p = static_cast<float>(topP);
  p.min_p = static_cast<float>(minP);
  p.repeat_penalty = static_cast<float>(repeatPenalty);
  p.seed = seed >= 0 ? static_cast<uint64_t>(seed) : randomSeed;
  return p;
}

bool GenerationStats::isError() const {
  return finishReason == QLatin1String(iwb::finish_reason_name(FinishReason::Error));
}

bool GenerationStats::isAborted() const {
  return finishReason == QLatin1String(iwb::finish_reason_name(FinishReason::Aborted));
}

double GenerationStats::tokensPerSecond() const {
  if (numGeneratedTokens < 2 || generationSeconds <= 0) return 0;
  return (numGeneratedTokens - 1) / generationSeconds;
}

QString GenerationStats::summaryLine() const {
  const QLocale locale;
  QStringList parts;
  if (!ranOn.isEmpty()) parts << ranOn;
  if (numGeneratedTokens > 0) {
    parts << QCoreApplication::translate("GenerationStats", "TTFT %1 s")
                 .arg(locale.toString(timeToFirstTokenSeconds, 'f', 2));
  }
  if (tokensPerSecond() > 0) {
    parts << QCoreApplication::translate("GenerationStats", "%1 tok/s").arg(locale.toString(tokensPerSecond(), 'f', 1));
  }
  parts << (numGeneratedTokens == 1
                ? QCoreApplication::translate("GenerationStats", "1 token")
                : QCoreApplication::translate("GenerationStats", "%1 tokens").arg(numGeneratedTokens));
  parts << (isAborted() ? QCoreApplication::translate("GenerationStats", "stopped") : finishReason);
  return parts.join(QStringLiteral(" · "));
}

QJsonObject GenerationStats::toJson() const {
  QJsonObject json{
      {QStringLiteral("finish_reason"), finishReason},
      {QStringLiteral("prompt_tokens"), numPromptTokens},
      {QStringLiteral("generated_tokens"), numGeneratedTokens},
      {QStringLiteral("ttft_s"), timeToFirstTokenSeconds},
      {QStringLiteral("generation_s"), generationSeconds},
      {QStringLiteral("tokens_per_s"), tokensPerSecond()},  // derived; stored for SQL queries
      {QStringLiteral("seed"), QString::number(seed)},
  };
  if (!errorMessage.isEmpty()) json.insert(QStringLiteral("error"), errorMessage);
  if (!ranOn.isEmpty()) json.insert(QStringLiteral("ran_on"), ranOn);
  return json;
}

GenerationStats GenerationStats::fromJson(const QJsonObject& json) {
  GenerationStats s;
  s.finishReason = json.value(QLatin1String("finish_reason")).toString();
  s.errorMessage = json.value(QLatin1String("error")).toString();
  s.numPromptTokens = json.value(QLatin1String("prompt_tokens")).toInt();
  s.numGeneratedTokens = json.value(QLatin1String("generated_tokens")).toInt();
  s.timeToFirstTokenSeconds = json.value(QLatin1String("ttft_s")).toDouble();
  s.generationSeconds = json.value(QLatin1String("generation_s")).toDouble();
  s.seed = json.value(QLatin1String("seed")).toString().toULongLong();
  s.ranOn = json.value(QLatin1String("ran_on")).toString();
  return s;
}

GenerationInput BatchInput::inputFor(qsizetype i) const {
  GenerationInput input;
  if (!systemText.isEmpty()) input.messages.append({QStringLiteral("system"), systemText});
  input.messages.append({QStringLiteral("user"), prompts.value(i)});
  input.sampling = sampling;
  input.templateOverride = templateOverride;
  input.numDraftTokens = numDraftTokens;
  return input;
}

QStringList chatTemplateFamilyNames() {
  QStringList names;
  for (const auto family : {ChatTemplateFamily::ChatMl, ChatTemplateFamily::Llama3, ChatTemplateFamily::Llama2,
                            ChatTemplateFamily::Mistral, ChatTemplateFamily::Gemma, ChatTemplateFamily::Phi3,
                            ChatTemplateFamily::Zephyr, ChatTemplateFamily::Tulu, ChatTemplateFamily::SmolLM3,
                            ChatTemplateFamily::Granite, ChatTemplateFamily::Harmony, ChatTemplateFamily::Glm45,
                            ChatTemplateFamily::Glm47, ChatTemplateFamily::DeepSeekV31, ChatTemplateFamily::KimiK2,
                            ChatTemplateFamily::Gemma4, ChatTemplateFamily::Qwen35, ChatTemplateFamily::Plain}) {
    const std::string_view name = chat_template_family_name(family);
    names << QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
  }
  return names;
}

QString chatTemplateDisplayName(const QString& familyName) {
  static const QHash<QString, QString> kDisplay = {
      {QStringLiteral("chatml"), QStringLiteral("ChatML")},
      {QStringLiteral("llama2"), QStringLiteral("Llama 2")},
      {QStringLiteral("llama3"), QStringLiteral("Llama 3")},
      {QStringLiteral("mistral"), QStringLiteral("Mistral")},
      {QStringLiteral("gemma"), QStringLiteral("Gemma")},
      {QStringLiteral("phi3"), QStringLiteral("Phi-3")},
      {QStringLiteral("zephyr"), QStringLiteral("Zephyr")},
      {QStringLiteral("tulu"), QStringLiteral("Tülu (OLMo 2)")},
      {QStringLiteral("smollm3"), QStringLiteral("SmolLM3")},
      {QStringLiteral("granite"), QStringLiteral("Granite")},
      {QStringLiteral("plain"), QStringLiteral("Plain")},
      {QStringLiteral("harmony"), QStringLiteral("Harmony (gpt-oss)")},
      {QStringLiteral("hermes"), QStringLiteral("Hermes (tool use)")},
      {QStringLiteral("qwen3-coder"), QStringLiteral("Qwen3-Coder")},
      {QStringLiteral("glm-4.5"), QStringLiteral("GLM-4.5, 4.6")},
      {QStringLiteral("glm-4.7"), QStringLiteral("GLM-4.7")},
      {QStringLiteral("deepseek-v3.1"), QStringLiteral("DeepSeek V3.1")},
      {QStringLiteral("kimi-k2"), QStringLiteral("Kimi K2")},
      {QStringLiteral("gemma4"), QStringLiteral("Gemma 4")},
      {QStringLiteral("qwen3.5"), QStringLiteral("Qwen3.5")},
  };
  return kDisplay.value(familyName, familyName);
}

void registerGenerationMetaTypes() {
  qRegisterMetaType<iwb::ui::SamplingSettings>();
  qRegisterMetaType<iwb::ui::GenerationInput>();
  qRegisterMetaType<iwb::ui::TokenProbability>();
  qRegisterMetaType<iwb::ui::GenerationStats>();
  qRegisterMetaType<iwb::ui::BatchInput>();
  qRegisterMetaType<QList<quint64>>();
  qRegisterMetaType<iwb::ui::EngineLoadOptions>();
  qRegisterMetaType<iwb::ui::LoadedModel>();
}

}  // namespace iwb::ui
