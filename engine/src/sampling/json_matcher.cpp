// JsonMatcher: a pushdown reader of JSON, one byte at a time, held to a JsonGrammar.
//
// A path is a stack of frames (the object, array, string, number or literal being written,
// innermost last). A byte either moves the top frame on, ends it and goes on to its parent (a
// number ends at the first byte that is not part of it), or is refused. Where the grammar
// leaves a choice the bytes have not settled (anyOf; a key that may be a listed property or
// another), each choice is a path of its own; a path that refuses a byte is dropped.
#include "iwb/engine/sampling/json_grammar.h"

#include "iwb/engine/sampling/pattern_walk.h"
#include "sampling/number_bounds.h"
#include "sampling/pattern_chars.h"
#include "sampling/text_end.h"
#include "sampling/utf8_lead.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace iwb {
namespace {

using Frame = JsonMatcher::Frame;
using Kind = Frame::Kind;
using Path = JsonMatcher::Path;
using Node = JsonGrammar::Node;
using detail::escaped_char;
using detail::is_number_end;
using detail::number_is_within;
using detail::number_may_fit;
using namespace detail::number_phase;
using detail::may_escape;
using detail::pattern_char_byte;
using detail::regex_takes;

// Limits that keep a model from writing forever where JSON allows it (llama.cpp's JSON grammar
// has the same kind: whitespace runs, integer digits), and keep the paths few.
// Whitespace between tokens, as llama.cpp's JSON grammar allows it: one space, or a newline and
// up to 20 spaces or tabs of indentation; none before the value. A model cannot pad forever.
constexpr int32_t kMaxIndent = 20;
constexpr int32_t kAfterOneSpace = -1;  // Path::whitespace_run: a space was written, no more
constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxPaths = 32;  // more than any real schema's ambiguity; extras are dropped

enum ObjectPhase : uint8_t { kObjectOpened, kObjectAfterKey, kObjectAfterValue, kObjectAfterComma };
enum ArrayPhase : uint8_t { kArrayOpened, kArrayAfterValue };
enum StringPhase : uint8_t { kStringBody, kStringEscape, kStringUnicode };
enum TaggedPhase : uint8_t { kTaggedBetween, kTaggedOpening, kTaggedAfterName };
// A Value frame's phase when it is a sequence's piece (JsonGrammar::sequences): no white space
// before it.
constexpr uint8_t kSequencePiece = 1;

const std::array<std::string, 3> kWordLiterals = {"true", "false", "null"};

bool is_whitespace(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// The texts a literal frame chooses among: an object's keys, a node's enum values, or the words.
const std::string& literal_text(const JsonGrammar& g, const Frame& f, int32_t i) {
  if (f.node < 0) return kWordLiterals[static_cast<size_t>(i)];
  const Node& n = g.node(f.node);
  return f.is_key ? n.properties[static_cast<size_t>(i)].key_json : n.literals[static_cast<size_t>(i)];
}

bool has_whole_literal(const JsonGrammar& g, const Frame& f) {
  for (const int32_t i : f.candidates) {
    if (static_cast<int64_t>(literal_text(g, f, i).size()) == f.count) return true;
  }
  return false;
}

bool starts_a_literal(const Node& n, uint8_t b) {
  for (const std::string& text : n.literals) {
    if (static_cast<uint8_t>(text[0]) == b) return true;
  }
  return false;
}

bool has_required(const Node& n, uint64_t seen) { return (seen & n.required_mask) == n.required_mask; }

bool has_more_keys(const Node& n, uint64_t seen) {
  if (n.additional >= 0) return true;
  for (size_t i = 0; i < n.properties.size(); ++i) {
    if ((seen >> i & 1) == 0) return true;
  }
  return false;
}

Frame make_frame(Kind kind, int32_t node, uint8_t phase = 0) {
  Frame f;
  f.kind = kind;
  f.node = node;
  f.phase = phase;
  return f;
}

// Feeds one byte to paths, appending every path it leads to.
class Stepper {
 public:
  // `is_raw_only`: only raw pieces may take the byte (JsonMatcher::feed's is_raw_only).
  Stepper(const JsonGrammar& g, std::vector<Path>* out, bool is_raw_only = false)
      : m_g(g), m_out(out), m_is_raw_only(is_raw_only) {}

  void advance(Path p, uint8_t b) {
    while (!p.stack.empty()) {  // an empty stack: the value is closed and nothing may follow
      Frame& f = p.stack.back();
      // (Texts and tagged parameters may end, and what follows them may be a marker.)
      if (m_is_raw_only && f.kind != Kind::Raw && f.kind != Kind::Value && f.kind != Kind::Text &&
          f.kind != Kind::Tagged) {
        return;
      }
      switch (f.kind) {
        case Kind::Value: {
          const Node& n = m_g.node(f.node);
          if (n.is_text) {  // a regex's text: raw text from its first byte
            if (m_is_raw_only) return;
            Frame text = make_frame(Kind::Text, f.node);
            text.regex = n.pattern->start();
            p.stack.back() = std::move(text);
            continue;
          }
          // Whitespace before a JSON value, unless it starts one of the node's literals (a
          // choice of from_choices may begin with a space; a JSON literal never does). None
          // before the reply's value, nor before a sequence's piece.
          // Markup (raw bytes, texts, sequences and their alternatives; every node built
          // without JSON types) takes white space as any other byte.
          const bool is_markup = n.types == 0;
          if (!is_markup && is_whitespace(b) && !starts_a_literal(n, b)) {
            if (is_root_value(p) || f.phase == kSequencePiece || m_is_raw_only) return;
            return take_whitespace(std::move(p), b);
          }
          const int32_t node = f.node;
          p.stack.pop_back();
          return start_value(std::move(p), node, b);
        }
        case Kind::Object: return object_byte(std::move(p), b);
        case Kind::Array:
          if (f.phase == kArrayOpened && !is_whitespace(b) && b != ']') {
            // The byte starts the first element.
            const Node& n = m_g.node(f.node);
            if (n.max_items == 0) return;
            f.count = 1;
            f.phase = kArrayAfterValue;
            if (!push(p, make_frame(Kind::Value, n.items))) return;
            continue;
          }
          return array_byte(std::move(p), b);
        case Kind::String: return string_byte(std::move(p), b);
        case Kind::Number:
          if (const detail::NumberStep step = detail::number_step(m_g.node(f.node), f, b);
              step != detail::NumberStep::Ended) {
            if (step == detail::NumberStep::Took) keep(std::move(p));
            return;
          }
          // The number ended before b (its parent takes b), if its value is within its bounds.
          if (!number_is_within(m_g.node(p.stack.back().node), p.stack.back().text)) return;
          p.stack.pop_back();
          continue;
        case Kind::Literal:
          if (literal_byte(p, b)) return;
          if (!has_whole_literal(m_g, p.stack.back())) return;
          end_literal(p);  // the literal ended before b: its parent takes b
          continue;
        case Kind::Text:
          // Inside a sequence, the text may end where its pattern matches: the next piece takes b.
          if (p.stack.size() > 1 && f.utf8_left == 0 && m_g.node(f.node).pattern->is_accepting(f.regex)) {
            Path ended = p;
            ended.stack.pop_back();
            advance(std::move(ended), b);
          }
          if (m_is_raw_only) return;
          return text_byte(std::move(p), b);
        case Kind::Raw:
          if (static_cast<uint8_t>(f.text[static_cast<size_t>(f.count)]) != b) return;
          if (++f.count == static_cast<int64_t>(f.text.size())) p.stack.pop_back();
          return keep(std::move(p));
        case Kind::Until: return until_byte(std::move(p), b);
        case Kind::Tagged:
          if (f.phase == kTaggedOpening && m_is_raw_only) return;
          if (f.phase != kTaggedAfterName) return tagged_byte(std::move(p), b);
          {
            // The name was written (its literal or text ended before b): b begins its value.
            const Node& n = m_g.node(f.node);
            const int32_t value_node =
                f.current >= 0 ? n.properties[static_cast<size_t>(f.current)].node : n.additional;
            if (f.current >= 0) f.seen |= uint64_t{1} << f.current;
            f.phase = kTaggedBetween;
            if (!push(p, make_frame(Kind::Value, value_node, kSequencePiece))) return;
          }
          continue;
      }
    }
  }

 private:
  // The value the grammar's root describes: nothing below it but a framed grammar's suffix.
  static bool is_root_value(const Path& p) {
    return p.stack.size() == 1 || (p.stack.size() == 2 && p.stack.front().kind == Kind::Raw);
  }

  void keep(Path p) {
    p.whitespace_run = 0;
    if (m_out->size() < kMaxPaths) m_out->push_back(std::move(p));
  }

  // b is whitespace where JSON allows it.
  void take_whitespace(Path p, uint8_t b) {
    int32_t& run = p.whitespace_run;  // 0: none yet; n > 0: a newline and n - 1 indents
    if (run == 0 && b == ' ') {
      run = kAfterOneSpace;
    } else if (run == 0 && b == '\n') {
      run = 1;
    } else if (run > 0 && run <= kMaxIndent && (b == ' ' || b == '\t')) {
      ++run;
    } else {
      return;
    }
    if (m_out->size() < kMaxPaths) m_out->push_back(std::move(p));
  }

  static bool push(Path& p, Frame f) {
    if (p.stack.size() >= kMaxDepth) return false;
    p.stack.push_back(std::move(f));
    return true;
  }

  // b is the first byte of a value that fits `node`.
  void start_value(Path p, int32_t node, uint8_t b) {
    const Node& n = m_g.node(node);
    if (!n.any_of.empty()) {
      for (const int32_t alternative : n.any_of) start_value(p, alternative, b);
      return;
    }
    if (!n.sequence.empty()) {  // its pieces, the first on top
      for (auto piece = n.sequence.rbegin(); piece != n.sequence.rend(); ++piece) {
        if (!push(p, make_frame(Kind::Value, *piece, kSequencePiece))) return;
      }
      return advance(std::move(p), b);
    }
    if (!n.raw.empty()) {
      if (static_cast<uint8_t>(n.raw[0]) != b) return;
      if (n.raw.size() > 1) {
        Frame raw = make_frame(Kind::Raw, node);
        raw.text = n.raw;
        raw.count = 1;
        if (!push(p, std::move(raw))) return;
      }
      return keep(std::move(p));
    }
    if (!n.until.empty() || !n.tag_open.empty()) {
      if (!push(p, make_frame(n.until.empty() ? Kind::Tagged : Kind::Until, node, 0))) return;
      return advance(std::move(p), b);
    }
    if (n.is_text) {  // a regex's text as a sequence's piece
      if (!push(p, make_frame(Kind::Value, node, kSequencePiece))) return;
      return advance(std::move(p), b);
    }
    if (m_is_raw_only) return;
    Frame f;
    if (!n.literals.empty()) {
      f = make_frame(Kind::Literal, node);
      for (size_t i = 0; i < n.literals.size(); ++i) {
        if (static_cast<uint8_t>(n.literals[i][0]) == b) f.candidates.push_back(static_cast<int32_t>(i));
      }
      if (f.candidates.empty()) return;
      f.count = 1;
    } else if (b == '{' && (n.types & JsonGrammar::kObject)) {
      f = make_frame(Kind::Object, node, kObjectOpened);
    } else if (b == '[' && (n.types & JsonGrammar::kArray)) {
      f = make_frame(Kind::Array, node, kArrayOpened);
    } else if (b == '"' && (n.types & JsonGrammar::kString)) {
      f = make_frame(Kind::String, node, kStringBody);
      if (n.pattern) {
        f.regex = n.pattern->start();
        // Not opened where the pattern cannot match within the length allowed.
        if (n.max_length >= 0 && n.pattern->distance_to_match(f.regex) > n.max_length) return;
      }
    } else if ((b == '-' || is_digit(b)) && (n.types & (JsonGrammar::kInteger | JsonGrammar::kNumber))) {
      f = make_frame(Kind::Number, node, b == '-' ? kMinus : (b == '0' ? kZero : kIntegerDigits));
      f.count = is_digit(b) ? 1 : 0;
      if (n.has_bounds()) {
        f.text = std::string(1, static_cast<char>(b));
        if (!number_may_fit(n, f.text, f.phase, (n.types & JsonGrammar::kNumber) == 0)) return;
      }
    } else if ((b == 't' || b == 'f') && (n.types & JsonGrammar::kBoolean)) {
      f = make_frame(Kind::Literal, -1);
      f.candidates = {b == 't' ? 0 : 1};
      f.count = 1;
    } else if (b == 'n' && (n.types & JsonGrammar::kNull)) {
      f = make_frame(Kind::Literal, -1);
      f.candidates = {2};
      f.count = 1;
    } else {
      return;
    }
    if (push(p, std::move(f))) keep(std::move(p));
  }

  void object_byte(Path p, uint8_t b) {
    Frame& f = p.stack.back();
    const Node& n = m_g.node(f.node);
    if (is_whitespace(b)) return take_whitespace(std::move(p), b);
    switch (f.phase) {
      case kObjectOpened:
      case kObjectAfterComma:
        if (b == '"') return start_key(std::move(p));
        if (b == '}' && f.phase == kObjectOpened && has_required(n, f.seen)) return close(std::move(p));
        return;
      case kObjectAfterKey: {
        if (b != ':') return;
        const int32_t value_node = f.current >= 0 ? n.properties[static_cast<size_t>(f.current)].node : n.additional;
        if (f.current >= 0) f.seen |= uint64_t{1} << f.current;
        f.phase = kObjectAfterValue;
        if (push(p, make_frame(Kind::Value, value_node))) keep(std::move(p));
        return;
      }
      case kObjectAfterValue:
        if (b == ',' && has_more_keys(n, f.seen)) {
          f.phase = kObjectAfterComma;
          return keep(std::move(p));
        }
        if (b == '}' && has_required(n, f.seen)) return close(std::move(p));
        return;
    }
  }

  // An opening quote where a key goes: a listed property not yet written, or (where the schema
  // allows other keys) any other string; both are followed until the bytes choose.
  void start_key(Path p) {
    Frame& object = p.stack.back();
    object.phase = kObjectAfterKey;
    object.current = -1;
    const Node& n = m_g.node(object.node);
    Frame listed = make_frame(Kind::Literal, object.node);
    listed.is_key = true;
    listed.count = 1;  // the quote
    for (size_t i = 0; i < n.properties.size(); ++i) {
      if ((object.seen >> i & 1) == 0) listed.candidates.push_back(static_cast<int32_t>(i));
    }
    Frame other = make_frame(Kind::String, object.node, kStringBody);
    other.is_key = true;
    const bool has_other = n.additional >= 0;
    if (has_other) {
      if (!listed.candidates.empty()) {
        Path q = p;
        if (push(q, std::move(listed))) keep(std::move(q));
      }
      if (push(p, std::move(other))) keep(std::move(p));
    } else if (!listed.candidates.empty() && push(p, std::move(listed))) {
      keep(std::move(p));
    }
  }

  void array_byte(Path p, uint8_t b) {
    Frame& f = p.stack.back();
    const Node& n = m_g.node(f.node);
    if (is_whitespace(b)) return take_whitespace(std::move(p), b);
    if (f.phase == kArrayOpened) {  // only ']' reaches here
      if (n.min_items == 0) close(std::move(p));
      return;
    }
    if (b == ',' && (n.max_items < 0 || f.count < n.max_items)) {
      ++f.count;
      if (push(p, make_frame(Kind::Value, n.items))) keep(std::move(p));
      return;
    }
    if (b == ']' && f.count >= n.min_items) close(std::move(p));
  }

  // The object or array on top is closed by b.
  void close(Path p) {
    p.stack.pop_back();
    keep(std::move(p));
  }

  void string_byte(Path p, uint8_t b) {
    Frame& f = p.stack.back();
    const Node* n = f.is_key ? nullptr : &m_g.node(f.node);  // keys have no length limits
    const bool is_full = n != nullptr && n->max_length >= 0 && f.count >= n->max_length;
    const Regex* re = n != nullptr ? n->pattern.get() : nullptr;
    // With a pattern and maxLength: how many characters may follow the one this byte is part
    // of (count has taken it once its first byte came).
    const auto room_after = [&](bool is_counted) -> int64_t {
      if (n == nullptr || n->max_length < 0) return -1;
      return n->max_length - f.count - (is_counted ? 0 : 1);
    };
    switch (f.phase) {
      case kStringBody:
        // A pattern's characters (not the closing quote, an escape or a control byte).
        if (re != nullptr && (f.utf8_left > 0 || (b != '"' && b != '\\' && b >= 0x20))) {
          if (!pattern_char_byte(*re, f, b, n->max_length)) return;
          break;
        }
        if (f.utf8_left > 0) {
          if (b < f.next_low || b > f.next_high) return;
          --f.utf8_left;
          f.next_low = 0x80;
          f.next_high = 0xBF;
          break;
        }
        if (b == '"') {
          if (n != nullptr && f.count < n->min_length) return;
          if (re != nullptr && !re->is_accepting(f.regex)) return;
          if (f.is_key) {
            // A listed key goes through its literal path; written here too it would be a
            // second way to the same key, held to the other keys' schema.
            for (const JsonGrammar::Property& prop : m_g.node(f.node).properties) {
              if (prop.key_json.compare(1, prop.key_json.size() - 2, f.text) == 0) return;
            }
            p.stack.pop_back();
            p.stack.back().current = -1;
          } else {
            p.stack.pop_back();
          }
          return keep(std::move(p));
        }
        if (b < 0x20 || is_full) return;
        if (b == '\\') {
          if (re != nullptr && !may_escape(*re, f, room_after(false))) return;
          f.phase = kStringEscape;
          break;
        }
        if (b >= 0x80) {  // a multi-byte character's lead byte (utf8_lead.h)
          const detail::Utf8Lead lead = detail::utf8_lead(b);
          if (lead.follow < 0) return;
          f.utf8_left = lead.follow;
          f.next_low = lead.low;
          f.next_high = lead.high;
        }
        ++f.count;
        break;
      case kStringEscape:
        if (re != nullptr) {
          // A pattern's string writes its characters as UTF-8, so \u escapes are not taken.
          const char32_t c = escaped_char(b);
          if (c == 0 || !regex_takes(*re, f, c, 0, 0, 0, room_after(false))) return;
        }
        if (b == 'u') {
          f.phase = kStringUnicode;
          f.utf8_left = 4;  // hex digits to come
        } else if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't') {
          f.phase = kStringBody;
        } else {
          return;
        }
        ++f.count;
        break;
      case kStringUnicode:
        // \uD800-\uDFFF are refused: half a surrogate pair is an error to many parsers, and a
        // reply can write the character's UTF-8 bytes instead.
        if (!is_hex(b)) return;
        if (f.utf8_left == 4) f.current = (b == 'd' || b == 'D') ? 1 : 0;
        if (f.utf8_left == 3 && f.current == 1 && !(b >= '0' && b <= '7')) return;
        if (--f.utf8_left == 0) f.phase = kStringBody;
        break;
    }
    if (f.is_key) f.text += static_cast<char>(b);
    keep(std::move(p));
  }

  // Tagged parameters, between them or in an opening tag.
  void tagged_byte(Path p, uint8_t b) {
    Frame& f = p.stack.back();
    const Node& n = m_g.node(f.node);
    if (f.phase == kTaggedBetween) {
      // With the required ones written the parameters may end here: what follows takes b.
      if (has_required(n, f.seen) && p.stack.size() > 1) {
        Path ended = p;
        ended.stack.pop_back();
        advance(std::move(ended), b);
      }
      if (m_is_raw_only || static_cast<uint8_t>(n.tag_open[0]) != b || !has_more_keys(n, f.seen)) return;
      f.phase = kTaggedOpening;
      f.count = 0;
    } else if (static_cast<uint8_t>(n.tag_open[static_cast<size_t>(f.count)]) != b) {
      return;
    }
    if (++f.count < static_cast<int64_t>(n.tag_open.size())) return keep(std::move(p));
    // The opening tag is whole: a name not yet written follows (or, where the schema allows
    // them, another), each a path until the bytes choose.
    f.phase = kTaggedAfterName;
    f.current = -1;
    Frame listed = make_frame(Kind::Literal, f.node);
    listed.is_key = true;
    for (size_t i = 0; i < n.properties.size(); ++i) {
      if ((f.seen >> i & 1) == 0) listed.candidates.push_back(static_cast<int32_t>(i));
    }
    if (n.other_key >= 0) {
      Path other = p;
      if (push(other, make_frame(Kind::Until, n.other_key))) keep(std::move(other));
    }
    if (!listed.candidates.empty() && push(p, std::move(listed))) keep(std::move(p));
  }

  // Raw text up to its end marker: whole UTF-8 characters, no NUL; `count` of the marker's bytes
  // end it so far (the longest such), and the text is over when all of them do.
  void until_byte(Path p, uint8_t b) {
    if (m_is_raw_only || b == 0) return;
    Frame& f = p.stack.back();
    const Node& n = m_g.node(f.node);
    const std::string& end = n.until;
    const auto chars_fit = [&](uint64_t chars, int64_t of_end) {  // the text's characters, not the end's
      return n.max_length < 0 || static_cast<int64_t>(chars) - of_end <= n.max_length;
    };
    if (f.utf8_left > 0) {
      if (b < f.next_low || b > f.next_high) return;
      --f.utf8_left;
      f.next_low = 0x80;
      f.next_high = 0xBF;
      return keep(std::move(p));
    }
    if (b >= 0x80) {
      const detail::Utf8Lead lead = detail::utf8_lead(b);
      if (lead.follow < 0 || !chars_fit(f.seen + 1, 0)) return;
      f.utf8_left = lead.follow;
      f.next_low = lead.low;
      f.next_high = lead.high;
      f.count = 0;
      ++f.seen;
      return keep(std::move(p));
    }
    const size_t k = detail::end_matched_after(end, static_cast<size_t>(f.count), b);
    if (!chars_fit(f.seen + 1, static_cast<int64_t>(k))) return;
    ++f.seen;
    f.count = static_cast<int64_t>(k);
    if (k == end.size()) {
      if (static_cast<int64_t>(f.seen) - f.count < n.min_length) return;
      p.stack.pop_back();
    }
    keep(std::move(p));
  }

  // A regex reply's byte (Text): whole UTF-8 characters the pattern takes, one after another.
  void text_byte(Path p, uint8_t b) {
    Frame& f = p.stack.back();
    if (!pattern_char_byte(*m_g.node(f.node).pattern, f, b, -1)) return;
    keep(std::move(p));
  }

  // True when the literal took b (or refused it for good); false when none of its texts goes
  // on with b (the caller then ends it there if one is whole).
  bool literal_byte(Path& p, uint8_t b) {
    Frame& f = p.stack.back();
    std::vector<int32_t> next;
    for (const int32_t i : f.candidates) {
      const std::string& text = literal_text(m_g, f, i);
      if (static_cast<int64_t>(text.size()) > f.count &&
          static_cast<uint8_t>(text[static_cast<size_t>(f.count)]) == b) {
        next.push_back(i);
      }
    }
    if (next.empty()) return false;
    f.candidates = std::move(next);
    ++f.count;
    keep(std::move(p));
    return true;
  }

  // Pops a literal that is whole; a key's tells its object which property comes next.
  void end_literal(Path& p) {
    const Frame& f = p.stack.back();
    int32_t whole = -1;
    for (const int32_t i : f.candidates) {
      if (static_cast<int64_t>(literal_text(m_g, f, i).size()) == f.count) whole = i;
    }
    const bool is_key = f.is_key;
    p.stack.pop_back();
    if (is_key) p.stack.back().current = whole;
  }

  const JsonGrammar& m_g;
  std::vector<Path>* m_out;
  bool m_is_raw_only = false;
};

bool path_is_complete(const JsonGrammar& g, const Path& p) {
  if (p.stack.empty()) return true;
  if (p.stack.size() != 1) return false;
  const Frame& f = p.stack.back();
  if (f.kind == Kind::Number) return is_number_end(f.phase) && number_is_within(g.node(f.node), f.text);
  if (f.kind == Kind::Literal) return has_whole_literal(g, f);
  if (f.kind == Kind::Text) return f.utf8_left == 0 && g.node(f.node).pattern->is_accepting(f.regex);
  if (f.kind == Kind::Tagged) return f.phase == kTaggedBetween && has_required(g.node(f.node), f.seen);
  if (f.kind == Kind::Value && g.node(f.node).is_text) {  // nothing written: the empty text
    const Regex& re = *g.node(f.node).pattern;
    return re.is_accepting(re.start());
  }
  return false;
}

}  // namespace

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> grammar, std::string_view lead)
    : m_grammar(std::move(grammar)) {
  Path start;
  const auto push_raw = [&](std::string text) {
    if (text.empty()) return;
    Frame raw = make_frame(Kind::Raw, -1);
    raw.text = std::move(text);
    start.stack.push_back(std::move(raw));
  };
  push_raw(m_grammar->suffix());  // written last: the bottom of the stack
  start.stack.push_back(make_frame(Kind::Value, m_grammar->root()));
  push_raw(std::string(lead) + m_grammar->prefix());
  m_paths.push_back(std::move(start));
}

bool JsonMatcher::feed(std::string_view bytes, bool is_raw_only) {
  std::vector<Path> paths = m_paths;
  std::vector<Path> next;
  for (const char c : bytes) {
    next.clear();
    Stepper stepper(*m_grammar, &next, is_raw_only);
    for (Path& p : paths) stepper.advance(std::move(p), static_cast<uint8_t>(c));
    if (next.empty()) return false;
    paths.swap(next);
  }
  m_paths = std::move(paths);
  return true;
}

bool JsonMatcher::can_feed(std::string_view bytes, bool is_raw_only) const {
  JsonMatcher copy = *this;
  return copy.feed(bytes, is_raw_only);
}

bool JsonMatcher::is_complete() const {
  for (const Path& p : m_paths) {
    if (path_is_complete(*m_grammar, p)) return true;
  }
  return false;
}

std::optional<JsonMatcher::PatternPlace> JsonMatcher::pattern_place() const {
  if (m_paths.size() != 1 || m_paths[0].stack.empty()) return std::nullopt;
  const Frame& top = m_paths[0].stack.back();
  PatternPlace place;
  if (top.kind == Kind::String) {
    if (top.is_key || top.phase != kStringBody || !m_grammar->node(top.node).pattern) return std::nullopt;
    place.max_length = m_grammar->node(top.node).max_length;
    place.is_in_string = true;
  } else if (top.kind != Kind::Text || m_paths[0].stack.size() > 1) {
    return std::nullopt;  // a text inside a sequence may end and its next piece go on
  }
  place.regex = m_grammar->node(top.node).pattern.get();
  place.frame = top;
  return place;
}

std::optional<bool> JsonMatcher::pattern_takes(std::string_view bytes) const {
  std::optional<PatternPlace> place = pattern_place();
  if (!place) return std::nullopt;
  return PatternWalk(*place).takes(bytes);
}

std::optional<JsonMatcher::RawText> JsonMatcher::raw_text() const {
  if (m_paths.size() != 1 || m_paths[0].stack.empty()) return std::nullopt;
  const Frame& f = m_paths[0].stack.back();
  if (f.kind != Kind::Until || f.utf8_left != 0) return std::nullopt;
  const JsonGrammar::Node& n = m_grammar->node(f.node);
  if (n.max_length >= 0) return std::nullopt;
  return RawText{n.until, f.count};
}

int64_t JsonMatcher::string_room() const {
  int64_t room = -1;
  for (const Path& p : m_paths) {
    if (p.stack.empty()) return -1;
    const Frame& f = p.stack.back();
    if (f.kind != Kind::String || f.is_key || f.phase != kStringBody || f.utf8_left != 0) return -1;
    const Node& n = m_grammar->node(f.node);
    if (n.pattern) return -1;  // each character must fit the pattern: no shortcut
    room = std::max(room, n.max_length < 0 ? INT64_MAX : n.max_length - f.count);
  }
  return room;
}

std::bitset<256> JsonMatcher::next_bytes() const {
  std::bitset<256> out;
  std::vector<Path> next;
  for (int b = 0; b < 256; ++b) {
    next.clear();
    Stepper stepper(*m_grammar, &next);
    for (const Path& p : m_paths) {
      stepper.advance(p, static_cast<uint8_t>(b));
      if (!next.empty()) break;
    }
    if (!next.empty()) out.set(static_cast<size_t>(b));
  }
  return out;
}

}  // namespace iwb
