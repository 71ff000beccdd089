// Prometheus text exposition (format 0.0.4, the one vLLM, SGLang, llama-server and `iwb serve`
// write) parsed into metric families. Tolerant the way Prometheus' own parser is: unknown
// comment lines are skipped, samples without a TYPE line form an "untyped" family; a line that
// cannot be parsed is an error naming its line number (the caller reports "garbage /metrics").
#pragma once

#include "iwb/engine/status.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::remote {

struct MetricSample {
  std::string name;                           // as written: foo_bucket, foo_sum, foo_total ...
  std::map<std::string, std::string> labels;  // unescaped label values
  double value = 0;                           // NaN and ±Inf as written
  std::optional<int64_t> timestamp_ms;
};

enum class MetricType { Counter, Gauge, Histogram, Summary, Untyped };

struct MetricFamily {
  std::string name;  // the TYPE line's name; counters keep a trailing _total as written
  MetricType type = MetricType::Untyped;
  std::string help;
  std::vector<MetricSample> samples;
};

Result<std::vector<MetricFamily>> parse_prometheus_text(std::string_view text);

const char* metric_type_name(MetricType type);  // "counter", "gauge", ...

}  // namespace iwb::remote
