// OptionTable: parsing argv against the rows, the one-line errors, the generated --help.
#include "options/option_table.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace iwb::cli {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

bool is_long_name(std::string_view name) { return name.size() > 2 && name.substr(0, 2) == "--"; }

// llama.cpp accepts "--ctx_size" for "--ctx-size"; so do we.
std::string normalize_long_name(std::string_view name) {
  std::string out(name);
  if (is_long_name(out)) std::replace(out.begin() + 2, out.end(), '_', '-');
  return out;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : std::string(separator)) + p;
  return out;
}

// "an integer >= 1", "a number from 0 to 1", "an integer".
std::string range_text(const Option& o, std::string_view noun) {
  std::string text(noun);
  const bool has_min = std::isfinite(o.min), has_max = std::isfinite(o.max);
  if (has_min && has_max) return text + " from " + format_number(o.min) + " to " + format_number(o.max);
  if (has_min) return text + (o.is_min_exclusive ? " > " : " >= ") + format_number(o.min);
  if (has_max) return text + " <= " + format_number(o.max);
  return text;
}

bool is_in_range(const Option& o, double v) {
  if (o.is_min_exclusive ? !(v > o.min) : !(v >= o.min)) return false;
  return v <= o.max;
}

// What a value of this row must be, for "-t expects <this>, got 'x'".
std::string expectation(const Option& o) {
  switch (o.kind()) {
    case ValueKind::Int: return range_text(o, "an integer");
    case ValueKind::Float: return range_text(o, "a number");
    case ValueKind::Enum: return "one of " + join(o.choices, ", ");
    case ValueKind::List: return "a comma-separated list of " + range_text(o, "integers");
    default: return "a value";
  }
}

// Whole-string integer parse into T; false on junk, an empty string or overflow of T.
template <typename T>
bool parse_integer(std::string_view text, T* out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

// Parses and bounds-checks an integer for destination type T. "" on success, else the reason.
template <typename T>
std::string store_integer(const Option& o, std::string_view name, std::string_view value, T* out) {
  T v{};
  if (!parse_integer(value, &v) || !is_in_range(o, static_cast<double>(v))) {
    return std::string(name) + " expects " + expectation(o) + ", got '" + std::string(value) + "'";
  }
  *out = v;
  return {};
}

std::string store_value(const Option& o, std::string_view name, std::string_view value) {
  const auto bad = [&] { return std::string(name) + " expects " + expectation(o) + ", got '" + std::string(value) + "'"; };
  return std::visit(
      Overloaded{
          [&](bool* out) -> std::string {
            *out = true;
            return {};
          },
          [&](int32_t* out) { return store_integer(o, name, value, out); },
          [&](int64_t* out) { return store_integer(o, name, value, out); },
          [&](uint64_t* out) { return store_integer(o, name, value, out); },
          [&](float* out) -> std::string {
            float v = 0;
            const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
            if (ec != std::errc() || ptr != value.data() + value.size() || value.empty() || !std::isfinite(v) ||
                !is_in_range(o, v)) {
              return bad();
            }
            *out = v;
            return {};
          },
          [&](std::string* out) -> std::string {
            if (o.choices.empty()) {
              *out = std::string(value);
              return {};
            }
            for (const std::string& c : o.choices) {
              if (lowercase(c) == lowercase(value)) {
                *out = c;
                return {};
              }
            }
            return bad();
          },
          [&](std::optional<std::string>* out) -> std::string {
            *out = std::string(value);
            return {};
          },
          [&](std::vector<int32_t>* out) -> std::string {
            std::vector<int32_t> list;
            std::string_view rest = value;
            while (true) {
              const size_t comma = rest.find(',');
              int32_t v = 0;
              if (!parse_integer(rest.substr(0, comma), &v) || !is_in_range(o, v)) return bad();
              list.push_back(v);
              if (comma == std::string_view::npos) break;
              rest = rest.substr(comma + 1);
            }
            *out = std::move(list);
            return {};
          },
          [&](const CustomSetter& set) { return set(name, value); },
      },
      o.destination);
}

// The destination's current value as help text: what the row defaults to.
std::string current_value_text(const Option& o) {
  return std::visit(Overloaded{
                        [](bool*) { return std::string(); },
                        [](int32_t* v) { return std::to_string(*v); },
                        [](int64_t* v) { return std::to_string(*v); },
                        [](uint64_t* v) { return std::to_string(*v); },
                        [](float* v) { return format_number(*v); },
                        [](std::string* v) { return *v; },
                        [](std::optional<std::string>* v) { return v->value_or(""); },
                        [](std::vector<int32_t>* v) {
                          std::string out;
                          for (const int32_t k : *v) out += (out.empty() ? "" : ",") + std::to_string(k);
                          return out;
                        },
                        [](const CustomSetter&) { return std::string(); },
                    },
                    o.destination);
}

}  // namespace

ValueKind Option::kind() const {
  return std::visit(Overloaded{
                        [](bool*) { return ValueKind::Flag; },
                        [](int32_t*) { return ValueKind::Int; },
                        [](int64_t*) { return ValueKind::Int; },
                        [](uint64_t*) { return ValueKind::Int; },
                        [](float*) { return ValueKind::Float; },
                        [&](std::string*) { return choices.empty() ? ValueKind::String : ValueKind::Enum; },
                        [](std::optional<std::string>*) { return ValueKind::String; },
                        [](std::vector<int32_t>*) { return ValueKind::List; },
                        [](const CustomSetter&) { return ValueKind::Custom; },
                    },
                    destination);
}

OptionTable::OptionTable(std::string command, std::string usage, std::string summary)
    : m_command(std::move(command)), m_usage(std::move(usage)), m_summary(std::move(summary)) {}

void OptionTable::begin_group(std::string heading) { m_current_heading = std::move(heading); }

void OptionTable::add(Option option) {
  for (const std::string& name : option.names) {
    assert(find(name) == nullptr && "an option name appears twice in one table");
    (void)name;
  }
  if (!option.default_text) option.default_text = current_value_text(option);
  if (option.kind() == ValueKind::Enum && option.value_name.empty()) option.value_name = join(option.choices, "|");
  m_options.push_back(std::move(option));
  m_headings.push_back(m_current_heading);
}

const Option* OptionTable::find(std::string_view name) const {
  const std::string wanted = normalize_long_name(name);
  for (const Option& o : m_options) {
    if (std::find(o.names.begin(), o.names.end(), wanted) != o.names.end()) return &o;
  }
  return nullptr;
}

std::string OptionTable::usage_error(std::string_view what) const {
  return "iwb " + m_command + ": " + std::string(what) + " (see 'iwb " + m_command + " --help')";
}

ParseOutcome OptionTable::parse(int argc, char** argv) const {
  const auto error = [](std::string message) { return ParseOutcome{ParseOutcome::Kind::UsageError, std::move(message)}; };
  const auto value_error = [&](std::string reason) { return error("iwb " + m_command + ": " + reason); };
  std::vector<bool> is_given(m_options.size(), false);
  size_t next_positional = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") return {ParseOutcome::Kind::HelpRequested, {}};

    if (arg.size() < 2 || arg[0] != '-') {  // a positional ("-" alone is one too: stdin by convention)
      while (next_positional < m_options.size() && !m_options[next_positional].is_positional()) ++next_positional;
      if (next_positional == m_options.size()) {
        return error(usage_error("unexpected argument '" + std::string(arg) + "'"));
      }
      const Option& o = m_options[next_positional];
      if (std::string reason = store_value(o, o.value_name, arg); !reason.empty()) return value_error(reason);
      is_given[next_positional++] = true;
      continue;
    }

    // "--name=value" for long names; the name as typed goes into messages.
    std::string_view typed = arg;
    std::optional<std::string_view> inline_value;
    if (const size_t eq = arg.find('='); is_long_name(arg) && eq != std::string_view::npos) {
      typed = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    const Option* o = find(typed);
    if (o == nullptr) return error(usage_error("unknown option '" + std::string(typed) + "'"));
    is_given[static_cast<size_t>(o - m_options.data())] = true;

    std::string_view value;
    if (o->kind() == ValueKind::Flag) {
      if (inline_value) return error(usage_error(std::string(typed) + " takes no value"));
    } else if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return error(usage_error(std::string(typed) + " needs a value (" + o->value_name + ")"));
    }
    if (std::string reason = store_value(*o, typed, value); !reason.empty()) return value_error(reason);
  }
  for (size_t k = 0; k < m_options.size(); ++k) {
    const Option& o = m_options[k];
    if (!o.is_required || is_given[k]) continue;
    const std::string name = o.is_positional() ? o.value_name : o.names.front();
    return error(usage_error(o.missing_message.empty() ? name + " is required" : o.missing_message));
  }
  return {};
}

std::string OptionTable::help() const {
  constexpr size_t kColumn = 30;  // where the help text starts
  std::string out = "usage: iwb " + m_command + (m_usage.empty() ? "" : " " + m_usage) + "\n";
  if (!m_summary.empty()) out += m_summary + "\n";
  auto add_row = [&](std::string left, const std::string& text) {
    out += "  " + left;
    if (left.size() + 2 >= kColumn) {
      out += "\n";
      out += std::string(kColumn, ' ');
    } else {
      out += std::string(kColumn - 2 - left.size(), ' ');
    }
    // Continuation lines of the help text line up under its first.
    for (size_t k = 0; k < text.size(); ++k) {
      out += text[k];
      if (text[k] == '\n') out += std::string(kColumn, ' ');
    }
    out += "\n";
  };
  std::optional<std::string> heading;
  for (size_t k = 0; k < m_options.size(); ++k) {
    const Option& o = m_options[k];
    if (!heading || *heading != m_headings[k]) {
      heading = m_headings[k];
      out += "\n";
      if (!heading->empty()) out += *heading + ":\n";
    }
    std::string left = o.is_positional() ? o.value_name : join(o.names, ", ");
    if (!o.is_positional() && o.kind() != ValueKind::Flag) left += " " + o.value_name;
    std::string text = o.help;
    if (o.default_text && !o.default_text->empty()) {
      // On a line of its own when it would run the line past about 100 columns.
      const std::string shown = "(default: " + *o.default_text + ")";
      const size_t last_line = text.size() - (text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
      text += (kColumn + last_line + 1 + shown.size() > 100 ? "\n" : " ") + shown;
    }
    add_row(left, text);
  }
  out += "\n";
  add_row("-h, --help", "print this help");
  return out;
}

int parse_command_line(const OptionTable& table, int argc, char** argv) {
  const ParseOutcome outcome = table.parse(argc, argv);
  switch (outcome.kind) {
    case ParseOutcome::Kind::Parsed: return -1;
    case ParseOutcome::Kind::HelpRequested: std::fputs(table.help().c_str(), stdout); return 0;
    case ParseOutcome::Kind::UsageError: break;
  }
  std::fprintf(stderr, "%s\n", outcome.message.c_str());
  // A command typed bare gets its help too: the person is finding out how it is used.
  if (argc <= 1) std::fprintf(stderr, "\n%s", table.help().c_str());
  return 2;
}

int report_usage_error(const OptionTable& table, std::string_view what) {
  std::fprintf(stderr, "%s\n", table.usage_error(what).c_str());
  return 2;
}

}  // namespace iwb::cli
