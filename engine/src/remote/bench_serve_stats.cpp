// bench-serve's figures, defined as vLLM's benchmark_serving defines them (calculate_metrics):
// percentiles interpolated linearly like numpy.percentile, TPOT excluding the first token,
// throughput over the point's wall time, goodput as requests meeting every SLO per second.
#include "bench_serve_internal.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <numeric>

namespace iwb::remote {
namespace {

// numpy.percentile's default ("linear"): rank p/100·(n−1) between the neighbouring values.
double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (rank - static_cast<double>(below));
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

LatencyStats latency_stats(std::vector<double> values_ms) {
  LatencyStats s;
  if (values_ms.empty()) return s;
  std::sort(values_ms.begin(), values_ms.end());
  s.count = static_cast<int64_t>(values_ms.size());
  s.mean = std::accumulate(values_ms.begin(), values_ms.end(), 0.0) / static_cast<double>(values_ms.size());
  s.median = percentile_sorted(values_ms, 50);
  s.p90 = percentile_sorted(values_ms, 90);
  s.p99 = percentile_sorted(values_ms, 99);
  s.min = values_ms.front();
  s.max = values_ms.back();
  return s;
}

Result<GoodputSlo> parse_goodput(const std::string& text) {
  GoodputSlo slo;
  std::string item;
  auto take = [&](const std::string& raw) -> Status {
    const std::string entry = trimmed(raw);
    if (entry.empty()) return {};
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      return make_error(ErrorCode::InvalidArgument,
                        "goodput entry '" + entry + "' is not KEY:MILLISECONDS (e.g. ttft:500)");
    }
    std::string key = trimmed(entry.substr(0, colon));
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string value_text = trimmed(entry.substr(colon + 1));
    double value = 0;
    const auto [end, ec] = std::from_chars(value_text.data(), value_text.data() + value_text.size(), value);
    if (ec != std::errc{} || end != value_text.data() + value_text.size() || !(value > 0) || !std::isfinite(value)) {
      return make_error(ErrorCode::InvalidArgument,
                        "goodput value '" + value_text + "' for " + key + " is not a positive number of milliseconds");
    }
    std::optional<double>* target = key == "ttft"   ? &slo.ttft_ms
                                    : key == "tpot" ? &slo.tpot_ms
                                    : key == "e2el" ? &slo.e2el_ms
                                                    : nullptr;
    if (target == nullptr) {
      return make_error(ErrorCode::InvalidArgument,
                        "unknown goodput key '" + key + "' (use ttft, tpot or e2el, as vLLM does)");
    }
    if (target->has_value()) return make_error(ErrorCode::InvalidArgument, "goodput key '" + key + "' given twice");
    *target = value;
    return {};
  };
  for (const char c : text) {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      IWB_RETURN_IF_ERROR(take(item));
      item.clear();
    } else {
      item.push_back(c);
    }
  }
  IWB_RETURN_IF_ERROR(take(item));
  if (!slo.ttft_ms && !slo.tpot_ms && !slo.e2el_ms) {
    return make_error(ErrorCode::InvalidArgument, "no goodput SLO given (e.g. ttft:500,tpot:50)");
  }
  return slo;
}

RequestRecord make_request_record(const StreamedCompletion& c, double start_seconds, int64_t approx_prompt_tokens) {
  RequestRecord r;
  r.start_seconds = start_seconds;
  r.error = c.error;
  r.server_timings = c.server_timings;
  r.prompt_tokens = c.prompt_tokens >= 0 ? c.prompt_tokens : approx_prompt_tokens;
  r.output_tokens = c.completion_tokens >= 0 ? c.completion_tokens : static_cast<int64_t>(c.token_seconds.size());
  r.e2e_ms = c.e2e_seconds * 1e3;
  r.ttft_ms = c.ttft_seconds ? *c.ttft_seconds * 1e3 : 0;
  if (r.output_tokens > 1 && c.ttft_seconds)
    r.tpot_ms = (r.e2e_ms - r.ttft_ms) / static_cast<double>(r.output_tokens - 1);
  for (size_t i = 1; i < c.token_seconds.size(); ++i)
    r.itl_ms.push_back((c.token_seconds[i] - c.token_seconds[i - 1]) * 1e3);
  if (r.error.kind == RemoteErrorKind::None && !c.ttft_seconds) {
    // A completion without a single content token has no first-token time to report; vLLM
    // counts such a request as failed too.
    r.error = {RemoteErrorKind::Malformed, 0, "the stream finished without any content"};
  }
  return r;
}

bool meets_slo(const RequestRecord& r, const GoodputSlo& slo) {
  if (r.error.kind != RemoteErrorKind::None) return false;
  if (slo.ttft_ms && r.ttft_ms > *slo.ttft_ms) return false;
  if (slo.tpot_ms && r.tpot_ms > *slo.tpot_ms) return false;
  if (slo.e2el_ms && r.e2e_ms > *slo.e2el_ms) return false;
  return true;
}

void summarise_point(BenchServePoint* point, const GoodputSlo& slo) {
  BenchServePoint& p = *point;
  p.num_completed = p.num_failed = p.total_input_tokens = p.total_output_tokens = 0;
  p.errors_by_kind.clear();
  std::vector<double> ttfts, tpots, itls, e2els;
  int64_t num_good = 0;
  const bool has_slo = slo.ttft_ms || slo.tpot_ms || slo.e2el_ms;
  for (const RequestRecord& r : p.requests) {
    if (r.error.kind != RemoteErrorKind::None) {
      ++p.num_failed;
      ++p.errors_by_kind[remote_error_kind_name(r.error.kind)];
      continue;
    }
    ++p.num_completed;
    p.total_input_tokens += r.prompt_tokens;
    p.total_output_tokens += r.output_tokens;
    ttfts.push_back(r.ttft_ms);
    if (r.output_tokens > 1) tpots.push_back(r.tpot_ms);
    itls.insert(itls.end(), r.itl_ms.begin(), r.itl_ms.end());
    e2els.push_back(r.e2e_ms);
    if (has_slo && meets_slo(r, slo)) ++num_good;
  }
  const double d = p.duration_seconds > 0 ? p.duration_seconds : 0;
  auto per_second = [d](double n) { return d > 0 ? n / d : 0.0; };
  p.request_throughput = per_second(static_cast<double>(p.num_completed));
  p.output_throughput = per_second(static_cast<double>(p.total_output_tokens));
  p.total_token_throughput = per_second(static_cast<double>(p.total_input_tokens + p.total_output_tokens));
  p.goodput = has_slo ? per_second(static_cast<double>(num_good)) : 0;
  p.ttft = latency_stats(std::move(ttfts));
  p.tpot = latency_stats(std::move(tpots));
  p.itl = latency_stats(std::move(itls));
  p.e2el = latency_stats(std::move(e2els));
}

}  // namespace iwb::remote
