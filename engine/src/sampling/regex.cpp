// Regex: an ECMA-262 pattern parsed to a tree, compiled to a Thompson NFA over code points
// (each counted repetition written out as copies), and run as the set of states a text may be in.
#include "iwb/engine/sampling/regex.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace iwb {
namespace {

using Ranges = Regex::Ranges;
using State = Regex::State;

constexpr char32_t kMaxCodePoint = 0x10FFFF;
// A pattern's NFA stays small enough to follow per token for every token of a vocabulary;
// States are 16-bit. (Gemma 4's call arguments, objects and lists three deep, take about 4400:
// gemma4_tool_calls.cpp.)
constexpr size_t kMaxStates = 8192;
constexpr int kMaxRepeat = 1000;
constexpr int kMaxNesting = 64;

Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  char32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges digits() { return {{'0', '9'}}; }
Ranges word() { return normalized({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }
// ECMA-262's white space and line terminators.
Ranges space() {
  return normalized({{'\t', '\r'},
                     {' ', ' '},
                     {0xA0, 0xA0},
                     {0x1680, 0x1680},
                     {0x2000, 0x200A},
                     {0x2028, 0x2029},
                     {0x202F, 0x202F},
                     {0x205F, 0x205F},
                     {0x3000, 0x3000},
                     {0xFEFF, 0xFEFF}});
}
// `.`: anything but a line terminator.
Ranges dot() { return complement(normalized({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})); }
Ranges any() { return {{0, kMaxCodePoint}}; }

// The parsed pattern.
struct Ast {
  enum class Kind { Empty, Char, Concat, Alt, Repeat } kind = Kind::Empty;
  Ranges ranges;
  std::vector<Ast> kids;
  int min = 0, max = 0;  // Repeat: max < 0 is unbounded
};

// The characters a reply can write: UTF-8 has no surrogates (U+D800-U+DFFF) and nothing past
// U+10FFFF, and a JSON string's control characters are only the escapes \b \t \n \f \r (a
// pattern's string takes no \u escapes). A pattern's character outside them could never be
// matched, and would be a place no byte could leave.
Ranges writable(const Ranges& r, bool is_json_string) {
  Ranges unicode;
  for (auto [lo, hi] : r) {
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) continue;
    if (lo < 0xD800) unicode.emplace_back(lo, std::min<char32_t>(hi, 0xD7FF));
    if (hi > 0xDFFF) unicode.emplace_back(std::max<char32_t>(lo, 0xE000), hi);
  }
  if (!is_json_string) return unicode;
  const Ranges json = {{'\b', '\n'}, {'\f', '\r'}, {0x20, kMaxCodePoint}};
  Ranges out;
  for (const auto& [lo, hi] : unicode) {
    for (const auto& [jlo, jhi] : json) {
      if (lo <= jhi && hi >= jlo) out.emplace_back(std::max(lo, jlo), std::min(hi, jhi));
    }
  }
  return out;
}

Ast repeat_ast(Ast kid, int min, int max) {
  Ast a;
  a.kind = Ast::Kind::Repeat;
  a.min = min;
  a.max = max;
  a.kids.push_back(std::move(kid));
  return a;
}

class Parser {
 public:
  Parser(std::u32string text, bool is_json_string) : m_text(std::move(text)), m_is_json_string(is_json_string) {}

  // The whole pattern: top-level alternatives, each with its own anchors.
  Result<Ast> parse(Regex::Mode mode) {
    Ast alt;
    alt.kind = Ast::Kind::Alt;
    while (true) {
      const bool anchored_start = take('^');
      Result<Ast> body = parse_concat(0);
      if (!body) return body;
      bool anchored_end = false;
      if (take('$')) anchored_end = true;
      Ast one;
      one.kind = Ast::Kind::Concat;
      const bool is_search = mode == Regex::Mode::Search;
      if (is_search && !anchored_start) one.kids.push_back(repeat_ast(char_ast(any()), 0, -1));
      one.kids.push_back(std::move(*body));
      if (is_search && !anchored_end) one.kids.push_back(repeat_ast(char_ast(any()), 0, -1));
      alt.kids.push_back(std::move(one));
      if (at_end()) break;
      if (!take('|')) return error(peek() == ')' ? "an unmatched ')'" : "'^' or '$' inside the pattern");
    }
    return alt;
  }

 private:
  Ast char_ast(const Ranges& r) const {
    Ast a;
    a.kind = Ast::Kind::Char;
    a.ranges = writable(r, m_is_json_string);
    return a;
  }

  bool at_end() const { return m_pos >= m_text.size(); }
  char32_t peek(size_t ahead = 0) const { return m_pos + ahead < m_text.size() ? m_text[m_pos + ahead] : 0; }
  bool take(char32_t c) {
    if (at_end() || m_text[m_pos] != c) return false;
    ++m_pos;
    return true;
  }
  Status error(const std::string& what) const {
    return make_error(ErrorCode::InvalidArgument, what + " (at character " + std::to_string(m_pos) + ")");
  }

  // A sequence of quantified atoms, up to '|', ')' or the end ('$' at the top level's end).
  Result<Ast> parse_concat(int depth) {
    Ast seq;
    seq.kind = Ast::Kind::Concat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && depth == 0 && (m_pos + 1 == m_text.size() || peek(1) == '|')) break;
      if (peek() == '^' || peek() == '$') return error("'^' or '$' inside the pattern is not supported");
      Result<Ast> atom = parse_atom(depth);
      if (!atom) return atom;
      Result<Ast> quantified = parse_quantifier(std::move(*atom));
      if (!quantified) return quantified;
      seq.kids.push_back(std::move(*quantified));
    }
    return seq;
  }

  Result<Ast> parse_alternatives(int depth) {
    if (depth > kMaxNesting) return error("groups nested more than 64 deep");
    Ast alt;
    alt.kind = Ast::Kind::Alt;
    while (true) {
      Result<Ast> body = parse_concat(depth);
      if (!body) return body;
      alt.kids.push_back(std::move(*body));
      if (!take('|')) break;
    }
    return alt;
  }

  Result<Ast> parse_atom(int depth) {
    const char32_t c = m_text[m_pos++];
    switch (c) {
      case '.': return char_ast(dot());
      case '[': return parse_class();
      case '(': {
        if (take('?')) {
          if (take(':')) {
          } else if (peek() == '<' && peek(1) != '=' && peek(1) != '!') {
            while (!at_end() && peek() != '>') ++m_pos;  // a named group: the name is not used
            if (!take('>')) return error("a group name without '>'");
          } else {
            return error("lookaround ('(?=', '(?!', '(?<=', '(?<!') is not supported");
          }
        }
        Result<Ast> inner = parse_alternatives(depth + 1);
        if (!inner) return inner;
        if (!take(')')) return error("a '(' without ')'");
        return inner;
      }
      case ')': return error("an unmatched ')'");
      case '*':
      case '+':
      case '?': return error("a quantifier with nothing before it");
      case '\\': {
        Result<Ranges> r = parse_escape(/*in_class=*/false);
        if (!r) return r.status();
        return char_ast(std::move(*r));
      }
      default: return char_ast({{c, c}});
    }
  }

  // After an atom: * + ? {n} {n,} {n,m}, each perhaps lazy ('?' after it: the same texts).
  Result<Ast> parse_quantifier(Ast atom) {
    int min = 1, max = 1;
    if (take('*')) {
      min = 0, max = -1;
    } else if (take('+')) {
      min = 1, max = -1;
    } else if (take('?')) {
      min = 0, max = 1;
    } else if (peek() == '{') {
      const size_t saved = m_pos;
      ++m_pos;
      const std::optional<int> lo = number();
      std::optional<int> hi = lo;
      if (lo && take(',')) hi = peek() == '}' ? std::optional<int>(-1) : number();
      if (!lo || !hi || !take('}')) {
        m_pos = saved;  // not a quantifier: '{' is a literal (as ECMA-262's Annex B reads it)
        return atom;
      }
      if (*lo > kMaxRepeat || *hi > kMaxRepeat) return error("a repetition count above 1000");
      if (*hi >= 0 && *hi < *lo) return error("a repetition {n,m} with m < n");
      min = *lo, max = *hi;
    } else {
      return atom;
    }
    take('?');  // lazy
    if (peek() == '*' || peek() == '+' || peek() == '?') return error("a quantifier after a quantifier");
    return repeat_ast(std::move(atom), min, max);
  }

  std::optional<int> number() {
    int n = 0;
    bool any_digit = false;
    while (peek() >= '0' && peek() <= '9') {
      n = std::min(n * 10 + static_cast<int>(peek() - '0'), 100000);
      ++m_pos;
      any_digit = true;
    }
    return any_digit ? std::optional<int>(n) : std::nullopt;
  }

  std::optional<char32_t> hex(int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char32_t c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = static_cast<int>(c - '0');
      if (c >= 'a' && c <= 'f') d = static_cast<int>(c - 'a' + 10);
      if (c >= 'A' && c <= 'F') d = static_cast<int>(c - 'A' + 10);
      if (d < 0) return std::nullopt;
      v = v * 16 + static_cast<char32_t>(d);
      ++m_pos;
    }
    return v;
  }

  // After a backslash: the characters it stands for.
  Result<Ranges> parse_escape(bool in_class) {
    if (at_end()) return error("a '\\' at the end");
    const char32_t c = m_text[m_pos++];
    const auto one = [](char32_t x) { return Ranges{{x, x}}; };
    switch (c) {
      case 'd': return digits();
      case 'D': return complement(digits());
      case 'w': return word();
      case 'W': return complement(word());
      case 's': return space();
      case 'S': return complement(space());
      case 't': return one('\t');
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'b':
        if (in_class) return one('\b');
        return error("'\\b' (a word boundary) is not supported");
      case 'B': return error("'\\B' (a word boundary) is not supported");
      case 'x': {
        const std::optional<char32_t> v = hex(2);
        if (!v) return error("'\\x' without two hex digits");
        return one(*v);
      }
      case 'u': {
        if (take('{')) {
          char32_t v = 0;
          int n = 0;
          while (!at_end() && peek() != '}' && n < 7) {
            const std::optional<char32_t> d = hex(1);
            if (!d) return error("'\\u{' with a non-hex digit");
            v = v * 16 + *d;
            ++n;
          }
          if (n == 0 || !take('}') || v > kMaxCodePoint) return error("a bad '\\u{...}'");
          return one(v);
        }
        std::optional<char32_t> v = hex(4);
        if (!v) return error("'\\u' without four hex digits");
        // A surrogate pair written as two escapes is one character.
        if (*v >= 0xD800 && *v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const size_t saved = m_pos;
          m_pos += 2;
          const std::optional<char32_t> low = hex(4);
          if (low && *low >= 0xDC00 && *low <= 0xDFFF) return one(0x10000 + ((*v - 0xD800) << 10) + (*low - 0xDC00));
          m_pos = saved;
        }
        return one(*v);
      }
      case 'p':
      case 'P': return error("'\\p{...}' (Unicode properties) is not supported");
      case 'c': return error("'\\c' (control letters) is not supported");
      case 'k': return error("'\\k<...>' (back-references) is not supported");
      default:
        if (c >= '1' && c <= '9') return error("back-references ('\\1') are not supported");
        return one(c);  // escaped punctuation, or any other character as itself
    }
  }

  // After '[': the class up to ']'.
  Result<Ast> parse_class() {
    const bool negated = take('^');
    Ranges r;
    while (true) {
      if (at_end()) return error("a '[' without ']'");
      if (take(']')) break;
      Result<Ranges> lo = class_atom();
      if (!lo) return lo.status();
      if (peek() == '-' && peek(1) != ']' && m_pos + 1 < m_text.size()) {
        ++m_pos;
        Result<Ranges> hi = class_atom();
        if (!hi) return hi.status();
        if (lo->size() != 1 || hi->size() != 1 || (*lo)[0].first != (*lo)[0].second ||
            (*hi)[0].first != (*hi)[0].second) {
          return error("a range in a class whose end is a class ('\\d', '\\w', ...)");
        }
        if ((*hi)[0].first < (*lo)[0].first) return error("a range out of order in a class");
        r.emplace_back((*lo)[0].first, (*hi)[0].first);
        continue;
      }
      r.insert(r.end(), lo->begin(), lo->end());
    }
    r = normalized(std::move(r));
    return char_ast(negated ? complement(r) : r);
  }

  Result<Ranges> class_atom() {
    const char32_t c = m_text[m_pos++];
    if (c == '\\') return parse_escape(/*in_class=*/true);
    return Ranges{{c, c}};
  }

  std::u32string m_text;
  size_t m_pos = 0;
  bool m_is_json_string = false;
};

// UTF-8 to code points; a byte that does not begin a well-formed character is taken as itself
// (Latin-1), as a pattern from a JSON text never has one.
std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const int follow = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    bool is_whole = follow >= 0 && i + static_cast<size_t>(follow) < s.size();
    char32_t c = follow <= 0 ? b : b & (0x3F >> follow);
    for (int k = 1; is_whole && k <= follow; ++k) {
      const auto next = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      is_whole = (next & 0xC0) == 0x80;
      c = (c << 6) | (next & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not characters either.
    static constexpr char32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
    if (follow > 0 && is_whole && (c < kLeast[follow] || c > kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF))) {
      is_whole = false;
    }
    if (!is_whole) {
      out += static_cast<char32_t>(b);
      ++i;
      continue;
    }
    out += c;
    i += static_cast<size_t>(follow) + 1;
  }
  return out;
}

// Thompson's construction: a fragment is its first state and the outs still to be joined.
class Builder {
 public:
  struct Fragment {
    int32_t start = -1;
    std::vector<std::pair<int32_t, bool>> outs;  // (state, second out?)
  };

  Result<Fragment> build(const Ast& a) {
    if (m_states.size() > kMaxStates) {
      return make_error(ErrorCode::InvalidArgument,
                        "the pattern is too large (over 8192 states once repetitions are written out)");
    }
    switch (a.kind) {
      case Ast::Kind::Empty: return empty();
      case Ast::Kind::Char: {
        const int32_t s = add(State{State::Kind::Char, a.ranges, -1, -1});
        return Fragment{s, {{s, false}}};
      }
      case Ast::Kind::Concat: {
        if (a.kids.empty()) return empty();
        Result<Fragment> out = build(a.kids[0]);
        if (!out) return out;
        for (size_t i = 1; i < a.kids.size(); ++i) {
          Result<Fragment> next = build(a.kids[i]);
          if (!next) return next;
          patch(out->outs, next->start);
          out->outs = std::move(next->outs);
        }
        return out;
      }
      case Ast::Kind::Alt: {
        if (a.kids.size() == 1) return build(a.kids[0]);
        Fragment out;
        int32_t last_split = -1;
        for (size_t i = 0; i < a.kids.size(); ++i) {
          Result<Fragment> kid = build(a.kids[i]);
          if (!kid) return kid;
          out.outs.insert(out.outs.end(), kid->outs.begin(), kid->outs.end());
          int32_t entry = kid->start;
          if (i + 1 < a.kids.size()) {
            entry = add(State{State::Kind::Split, {}, kid->start, -1});
          }
          if (last_split < 0) {
            out.start = entry;
          } else {
            m_states[static_cast<size_t>(last_split)].out2 = entry;
          }
          last_split = i + 1 < a.kids.size() ? entry : -1;
        }
        return out;
      }
      case Ast::Kind::Repeat: return repeat(a.kids[0], a.min, a.max);
    }
    return empty();
  }

  std::vector<State> take_states() { return std::move(m_states); }
  int32_t add(State s) {
    m_states.push_back(std::move(s));
    return static_cast<int32_t>(m_states.size() - 1);
  }
  void patch(const std::vector<std::pair<int32_t, bool>>& outs, int32_t to) {
    for (const auto& [s, second] : outs)
      (second ? m_states[static_cast<size_t>(s)].out2 : m_states[static_cast<size_t>(s)].out) = to;
  }

 private:
  Fragment empty() {
    const int32_t s = add(State{State::Kind::Empty, {}, -1, -1});
    return Fragment{s, {{s, false}}};
  }

  // x{min,max}: min copies, then (max - min) optional ones nested, or a loop when unbounded.
  Result<Fragment> repeat(const Ast& kid, int min, int max) {
    Fragment out = empty();
    const auto append = [&](Fragment next) {
      patch(out.outs, next.start);
      out.outs = std::move(next.outs);
    };
    for (int i = 0; i < min; ++i) {
      Result<Fragment> copy = build(kid);
      if (!copy) return copy;
      append(std::move(*copy));
    }
    if (max < 0) {
      Result<Fragment> body = build(kid);
      if (!body) return body;
      const int32_t split = add(State{State::Kind::Split, {}, body->start, -1});
      patch(body->outs, split);
      append(Fragment{split, {{split, true}}});
      return out;
    }
    std::vector<std::pair<int32_t, bool>> exits;
    for (int i = min; i < max; ++i) {
      Result<Fragment> body = build(kid);
      if (!body) return body;
      const int32_t split = add(State{State::Kind::Split, {}, body->start, -1});
      exits.emplace_back(split, true);
      patch(out.outs, split);
      out.outs = std::move(body->outs);
    }
    out.outs.insert(out.outs.end(), exits.begin(), exits.end());
    return out;
  }

  std::vector<State> m_states;
};

bool contains(const Ranges& r, char32_t c) {
  // The first range that starts after c; the one before it is the only one that may hold c.
  const auto it = std::upper_bound(
      r.begin(), r.end(), c, [](char32_t x, const std::pair<char32_t, char32_t>& range) { return x < range.first; });
  return it != r.begin() && std::prev(it)->second >= c;
}

bool overlaps(const Ranges& r, char32_t lo, char32_t hi) {
  for (const auto& [a, b] : r) {
    if (a <= hi && b >= lo) return true;
  }
  return false;
}

}  // namespace

Result<std::shared_ptr<const Regex>> Regex::compile(std::string_view pattern, Mode mode) {
  // JSON Schema's patterns match a JSON string's text; guided_regex the reply's raw text.
  Parser parser(decode_utf8(pattern), mode == Mode::Search);
  Result<Ast> ast = parser.parse(mode);
  if (!ast)
    return make_error(ErrorCode::InvalidArgument, "pattern '" + std::string(pattern) + "': " + ast.error_message());
  Builder builder;
  Result<Builder::Fragment> body = builder.build(*ast);
  if (!body)
    return make_error(ErrorCode::InvalidArgument, "pattern '" + std::string(pattern) + "': " + body.error_message());
  const int32_t match = builder.add(State{State::Kind::Match, {}, -1, -1});
  builder.patch(body->outs, match);
  std::vector<State> states = builder.take_states();
  if (states.size() > kMaxStates) {
    return make_error(
        ErrorCode::InvalidArgument,
        "pattern '" + std::string(pattern) + "' is too large (over 8192 states once repetitions are written out)");
  }
  auto regex = std::make_shared<const Regex>(std::string(pattern), std::move(states), body->start);
  if (regex->distance_to_match(regex->start()) == INT32_MAX) {
    return make_error(ErrorCode::InvalidArgument, "pattern '" + std::string(pattern) + "' matches no text");
  }
  return regex;
}

// The states one step has visited, without clearing a table per character (a token mask steps
// every token of a vocabulary): a state is marked when its mark equals the step's number. Per
// thread, as requests of a batch may mask at once.
struct Regex::Marks {
  std::vector<uint32_t> mark;
  uint32_t step = 0;
  std::vector<int32_t> pending;

  static Marks& for_step(size_t num_states) {
    thread_local Marks marks;
    if (marks.mark.size() < num_states) marks.mark.resize(num_states, 0);
    if (++marks.step == 0) {  // wrapped: old marks could look current
      std::fill(marks.mark.begin(), marks.mark.end(), 0);
      marks.step = 1;
    }
    return marks;
  }
  bool visit(int32_t s) {
    uint32_t& m = mark[static_cast<size_t>(s)];
    if (m == step) return false;
    m = step;
    return true;
  }
};

void Regex::add_closure(int32_t state, Marks* marks, States* out) const {
  // Iterative: a long chain of empty moves must not deepen the stack.
  std::vector<int32_t>& pending = marks->pending;
  pending.clear();
  pending.push_back(state);
  while (!pending.empty()) {
    const int32_t s = pending.back();
    pending.pop_back();
    if (s < 0 || !marks->visit(s)) continue;
    const State& st = m_states[static_cast<size_t>(s)];
    switch (st.kind) {
      case State::Kind::Char:
      case State::Kind::Match: out->push_back(static_cast<uint16_t>(s)); break;
      case State::Kind::Empty: pending.push_back(st.out); break;
      case State::Kind::Split:
        pending.push_back(st.out2);
        pending.push_back(st.out);
        break;
    }
  }
}

Regex::States Regex::start() const {
  Marks& marks = Marks::for_step(m_states.size());
  States out;
  add_closure(m_start, &marks, &out);
  std::sort(out.begin(), out.end());
  return out;
}

Regex::States Regex::step(const States& states, char32_t c) const {
  Marks& marks = Marks::for_step(m_states.size());
  States out;
  for (const uint16_t s : states) {
    const State& st = m_states[s];
    // A character into states that can never reach a match (an empty class after them) is
    // not taken: it would lead where nothing may follow.
    if (st.kind == State::Kind::Char && m_distance[static_cast<size_t>(st.out)] != INT32_MAX &&
        contains(st.ranges, c)) {
      add_closure(st.out, &marks, &out);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool Regex::may_step_within(const States& states, char32_t lo, char32_t hi, int64_t max_after) const {
  for (const uint16_t s : states) {
    const State& st = m_states[s];
    if (st.kind != State::Kind::Char || !overlaps(st.ranges, lo, hi)) continue;
    const int32_t d = m_distance[static_cast<size_t>(st.out)];
    if (d != INT32_MAX && (max_after < 0 || d <= max_after)) return true;
  }
  return false;
}

int32_t Regex::distance_to_match(const States& states) const {
  int32_t best = INT32_MAX;
  for (const uint16_t s : states) best = std::min(best, m_distance[s]);
  return best;
}

void Regex::measure_distances() {
  // Relaxed until nothing changes: empty moves cost nothing, a character one. The NFA is small
  // (4096 states at most) and mostly forward, so few rounds are needed.
  m_distance.assign(m_states.size(), INT32_MAX);
  const auto at = [&](int32_t s) { return s < 0 ? INT32_MAX : m_distance[static_cast<size_t>(s)]; };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = m_states.size(); i-- > 0;) {
      const State& st = m_states[i];
      int32_t d = INT32_MAX;
      switch (st.kind) {
        case State::Kind::Match: d = 0; break;
        case State::Kind::Empty: d = at(st.out); break;
        case State::Kind::Split: d = std::min(at(st.out), at(st.out2)); break;
        case State::Kind::Char:
          if (!st.ranges.empty() && at(st.out) != INT32_MAX) d = at(st.out) + 1;
          break;
      }
      if (d < m_distance[i]) {
        m_distance[i] = d;
        changed = true;
      }
    }
  }
}

bool Regex::is_accepting(const States& states) const {
  for (const uint16_t s : states) {
    if (m_states[s].kind == State::Kind::Match) return true;
  }
  return false;
}

bool Regex::may_continue(const States& states) const {
  for (const uint16_t s : states) {
    if (m_states[s].kind == State::Kind::Char && !m_states[s].ranges.empty()) return true;
  }
  return false;
}

}  // namespace iwb
