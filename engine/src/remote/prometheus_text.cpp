// Prometheus text format 0.0.4 read line by line in one pass: no recursion, no backtracking, each
// byte looked at a bounded number of times (it reads what any server answers, garbage included).
// Where the format leaves room it behaves like Prometheus' own Python parser (prometheus_client),
// which tests/remote/test_prometheus_fixtures.py compares it with.
#include "iwb/engine/remote/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace iwb::remote {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_metric_name_start(char c) { return is_name_start(c) || c == ':'; }
bool is_metric_name_char(char c) { return is_name_char(c) || c == ':'; }

bool is_metric_name(std::string_view s) {
  if (s.empty() || !is_metric_name_start(s[0])) return false;
  for (const char c : s) {
    if (!is_metric_name_char(c)) return false;
  }
  return true;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_blank(s.front()) || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (is_blank(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Reads up to the next blank; advances `pos` past it.
std::string_view next_token(std::string_view line, size_t* pos) {
  while (*pos < line.size() && is_blank(line[*pos])) ++*pos;
  const size_t start = *pos;
  while (*pos < line.size() && !is_blank(line[*pos])) ++*pos;
  return line.substr(start, *pos - start);
}

// A float as Go and Python write them: digits, exponents, NaN, Inf, +Inf, -Inf (any case).
bool parse_value(std::string_view s, double* out) {
  if (s.empty() || s.find('_') != std::string_view::npos) return false;
  if (s[0] == '+') {
    s.remove_prefix(1);
    if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  }
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, std::chars_format::general);
  // Out of range ("1e999") is ±Inf for Python's float() too.
  if (ec == std::errc::result_out_of_range && end == s.data() + s.size()) {
    *out = s[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  return ec == std::errc() && end == s.data() + s.size();
}

bool parse_timestamp(std::string_view s, int64_t* out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

// HELP text escapes only backslash and newline; other backslashes stay as written.
std::string unescape_help(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
      out += s[i + 1] == 'n' ? '\n' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The sample names a family owns besides (or instead of) its own name.
bool family_owns(const MetricFamily& f, std::string_view sample) {
  const std::string_view n = f.name;
  if (f.type == MetricType::Counter && ends_with(n, "_total")) {
    // A counter typed foo_total (prometheus_client's way) owns foo_total and foo_created.
    const std::string_view base = n.substr(0, n.size() - 6);
    return sample == n ||
           (sample.size() == base.size() + 8 && sample.substr(0, base.size()) == base && ends_with(sample, "_created"));
  }
  if (sample.substr(0, n.size()) != n) return false;
  const std::string_view suffix = sample.substr(n.size());
  switch (f.type) {
    case MetricType::Counter: return suffix.empty() || suffix == "_total" || suffix == "_created";
    case MetricType::Histogram:
      return suffix == "_bucket" || suffix == "_sum" || suffix == "_count" || suffix == "_created";
    case MetricType::Summary: return suffix.empty() || suffix == "_sum" || suffix == "_count" || suffix == "_created";
    case MetricType::Gauge:
    case MetricType::Untyped: return suffix.empty();
  }
  return false;
}

class Parser {
 public:
  Result<std::vector<MetricFamily>> run(std::string_view text) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      ++m_line_number;
      m_raw_line = text.substr(start, end - start);
      Status status = parse_line(trim(m_raw_line));
      if (!status.is_ok()) return status;
      start = end + 1;
    }
    return std::move(m_families);
  }

 private:
  Status error(const std::string& what) const {
    constexpr size_t kShown = 200;
    std::string shown(m_raw_line.substr(0, kShown));
    if (m_raw_line.size() > kShown) shown += "...";
    return make_error(ErrorCode::CorruptFile,
                      "Prometheus text, line " + std::to_string(m_line_number) + ": " + what + ": \"" + shown + "\"");
  }

  Status parse_line(std::string_view s) {
    if (s.empty()) return {};
    if (s[0] == '#') return parse_comment(s);
    return parse_sample(s);
  }

  // "# HELP name text" and "# TYPE name type"; every other comment is skipped.
  Status parse_comment(std::string_view s) {
    size_t pos = 1;
    const std::string_view keyword = next_token(s, &pos);
    if (keyword != "HELP" && keyword != "TYPE") return {};
    const std::string_view name = next_token(s, &pos);
    if (name.empty()) return error(std::string(keyword) + " line without a metric name");
    if (!is_metric_name(name)) return error("invalid metric name '" + std::string(name) + "'");
    while (pos < s.size() && is_blank(s[pos])) ++pos;
    const std::string_view rest = s.substr(pos);
    const bool same = m_declared && m_families.back().name == name;
    if (keyword == "HELP") {
      if (!same) begin_family(std::string(name), MetricType::Untyped, true);
      m_families.back().help = unescape_help(rest);
      return {};
    }
    MetricType type;
    if (rest == "counter")
      type = MetricType::Counter;
    else if (rest == "gauge")
      type = MetricType::Gauge;
    else if (rest == "histogram")
      type = MetricType::Histogram;
    else if (rest == "summary")
      type = MetricType::Summary;
    else if (rest == "untyped" || rest == "unknown")
      type = MetricType::Untyped;
    else if (rest.empty())
      return error("TYPE line without a type");
    else
      return error("unknown metric type '" + std::string(rest) + "'");
    if (!same) {
      begin_family(std::string(name), type, true);
    } else {
      if (m_typed) return error("second TYPE line for " + std::string(name));
      if (!m_families.back().samples.empty()) return error("TYPE line after samples of " + std::string(name));
      m_families.back().type = type;
    }
    m_typed = true;
    return {};
  }

  void begin_family(std::string name, MetricType type, bool declared) {
    MetricFamily f;
    f.name = std::move(name);
    f.type = type;
    m_families.push_back(std::move(f));
    m_declared = declared;
    m_typed = false;
  }

  Status parse_sample(std::string_view s) {
    MetricSample out;
    size_t pos = 0;
    while (pos < s.size() && is_metric_name_char(s[pos])) ++pos;
    if (pos == 0 || !is_metric_name_start(s[0])) return error("expected a metric name");
    out.name = std::string(s.substr(0, pos));
    if (pos < s.size() && s[pos] == '{') {
      IWB_RETURN_IF_ERROR(parse_labels(s, &pos, &out.labels));  // the value may follow the '}' directly
    } else if (pos < s.size() && !is_blank(s[pos])) {
      return error("unexpected '" + std::string(1, s[pos]) + "' in the metric name");
    }
    const std::string_view value = next_token(s, &pos);
    if (value.empty()) return error("sample without a value");
    if (!parse_value(value, &out.value)) return error("invalid value '" + std::string(value) + "'");
    const std::string_view timestamp = next_token(s, &pos);
    if (!timestamp.empty()) {
      int64_t ms = 0;
      if (!parse_timestamp(timestamp, &ms)) return error("invalid timestamp '" + std::string(timestamp) + "'");
      out.timestamp_ms = ms;
    }
    if (!next_token(s, &pos).empty()) return error("unexpected text after the sample");
    add(std::move(out));
    return {};
  }

  // `{name="value",...}` from s[*pos] == '{'; a trailing comma is allowed.
  Status parse_labels(std::string_view s, size_t* pos, std::map<std::string, std::string>* out) {
    size_t i = *pos + 1;
    auto skip = [&] {
      while (i < s.size() && is_blank(s[i])) ++i;
    };
    while (true) {
      skip();
      if (i >= s.size()) return error("unterminated label set");
      if (s[i] == '}') break;
      const size_t name_start = i;
      if (!is_name_start(s[i])) return error("expected a label name");
      while (i < s.size() && is_name_char(s[i])) ++i;
      std::string name(s.substr(name_start, i - name_start));
      skip();
      if (i >= s.size() || s[i] != '=') return error("expected '=' after label " + name);
      ++i;
      skip();
      if (i >= s.size() || s[i] != '"') return error("expected '\"' to open the value of label " + name);
      ++i;
      std::string value;
      bool closed = false;
      for (; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '"') {
          closed = true;
          ++i;
          break;
        }
        if (c == '\\' && i + 1 < s.size()) {
          const char e = s[++i];
          if (e == 'n')
            value += '\n';
          else if (e == '\\' || e == '"')
            value += e;
          else
            value.append({'\\', e});  // not an escape: kept as written, as prometheus_client does
        } else {
          value += c;
        }
      }
      if (!closed) return error("unterminated value of label " + name);
      if (!out->emplace(name, std::move(value)).second) return error("label " + name + " given twice");
      skip();
      if (i < s.size() && s[i] == ',') {
        ++i;
      } else if (i >= s.size() || s[i] != '}') {
        return error("expected ',' or '}' after the value of label " + name);
      }
    }
    *pos = i + 1;
    return {};
  }

  // Into the family the TYPE/HELP lines above declared when it owns the name; otherwise into an
  // untyped family of that name (consecutive samples of one undeclared name share one).
  void add(MetricSample s) {
    const bool fits =
        !m_families.empty() && (m_declared ? family_owns(m_families.back(), s.name) : m_families.back().name == s.name);
    if (!fits) begin_family(s.name, MetricType::Untyped, false);
    m_families.back().samples.push_back(std::move(s));
  }

  std::vector<MetricFamily> m_families;
  bool m_declared = false;  // the last family came from HELP/TYPE lines
  bool m_typed = false;     // ... and had its TYPE line
  size_t m_line_number = 0;
  std::string_view m_raw_line;
};

}  // namespace

Result<std::vector<MetricFamily>> parse_prometheus_text(std::string_view text) { return Parser().run(text); }

const char* metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::Counter: return "counter";
    case MetricType::Gauge: return "gauge";
    case MetricType::Histogram: return "histogram";
    case MetricType::Summary: return "summary";
    case MetricType::Untyped: return "untyped";
  }
  return "untyped";
}

}  // namespace iwb::remote
