// The one command-line parser of every `iwb` command: a table of options (names, value kind,
// bounds, help, default, destination) that parses argv, reports a bad argument in one line and
// generates the command's --help. Shared rows live in option_groups.h.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace iwb::cli {

enum class ValueKind { Flag, Int, Float, String, Enum, List, Custom };

// Parses `value` for `option` (the spelling the user typed) and stores it. Returns "" when the
// value is good, else the whole reason, e.g. "unknown chat template 'x' (chatml, llama2, ...)".
using CustomSetter = std::function<std::string(std::string_view option, std::string_view value)>;

// Where a parsed value goes; the kind of the option follows from it (string + choices: Enum).
// An optional string tells "-p ''" from no -p at all.
using Destination = std::variant<bool*, int32_t*, int64_t*, uint64_t*, float*, std::string*,
                                 std::optional<std::string>*, std::vector<int32_t>*, CustomSetter>;

inline constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// One row of the table. Rows are aggregates so a command lists them with designated
// initializers, e.g. {.names = {"-t", "--threads"}, .value_name = "N", .destination = &n, .min = 1}.
struct Option {
  std::vector<std::string> names{};  // "-c", "--ctx-size", then older spellings; empty: positional
  std::string value_name{};          // "N", "FILE"; for a positional, its name in the usage line
  std::string help{};
  Destination destination{};
  double min = -kNoLimit;          // Int, Float and each List element
  double max = kNoLimit;
  bool is_min_exclusive = false;   // "> min" rather than ">= min"
  std::vector<std::string> choices{};         // Enum: accepted values (any case), stored as spelled here
  std::optional<std::string> default_text{};  // help's "(default: ...)"; unset: the destination's value
  bool is_required = false;
  std::string missing_message{};  // when required and absent; default "<first name> is required"

  ValueKind kind() const;
  bool is_positional() const { return names.empty(); }
};

// What parsing argv came to: go on, print the help (exit 0), or stop with a usage error (exit 2).
struct ParseOutcome {
  enum class Kind { Parsed, HelpRequested, UsageError };
  Kind kind = Kind::Parsed;
  std::string message;  // UsageError: the whole line, "iwb run: ... (see 'iwb run --help')"

  bool is_parsed() const { return kind == Kind::Parsed; }
};

class OptionTable {
 public:
  // `command`: "run"; `usage`: what follows "usage: iwb run " in the help, e.g.
  // "-m MODEL.gguf (-p PROMPT | -f FILE) [options]"; `summary`: one line on what it does.
  OptionTable(std::string command, std::string usage, std::string summary = {});

  // Rows added after this appear under `heading` in the help ("sampling", "output").
  void begin_group(std::string heading);
  // Adds a row; a name already in the table is a programming error (asserted).
  void add(Option option);

  // argv[0] is the command name. Values follow their option ("-t 4") or, for long names, an
  // '=' ("--temp=0"). "-h"/"--help" asks for the help. Required rows are checked last.
  ParseOutcome parse(int argc, char** argv) const;
  std::string help() const;

  // The one-line usage error for checks that span options: "iwb run: <what> (see 'iwb run --help')".
  std::string usage_error(std::string_view what) const;

  const std::string& command() const { return m_command; }
  const std::vector<Option>& options() const { return m_options; }
  // The row named `name` (any spelling), or nullptr.
  const Option* find(std::string_view name) const;

 private:
  std::string m_command, m_usage, m_summary;
  std::vector<Option> m_options;
  std::vector<std::string> m_headings;  // one per row
  std::string m_current_heading;
};

// Parses, prints the help to stdout or the error to stderr. Returns the exit status to stop
// with (0 after --help, 2 on a usage error), or -1 when the command goes on.
int parse_command_line(const OptionTable& table, int argc, char** argv);

// Prints table.usage_error(what) to stderr and returns 2, for the checks a command makes after
// parsing ("give exactly one of -p PROMPT or -f FILE").
int report_usage_error(const OptionTable& table, std::string_view what);

}  // namespace iwb::cli
