// Structured output: replies held to JSON, or to a JSON Schema, byte by byte. What OpenAI's
// `response_format` ({"type": "json_object"} and {"type": "json_schema"}), vLLM's guided JSON
// and llama.cpp's `--json-schema` offer: every reply that ends is valid JSON that fits.
//
// JsonGrammar is the schema compiled once (immutable, shared by requests); JsonMatcher is one
// reply's position in it, fed the bytes of each token as it is chosen. token_constraint.h turns
// a matcher into the tokens a sampler may pick.
#pragma once

#include "iwb/engine/sampling/regex.h"
#include "iwb/engine/status.h"

#include <bitset>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

// The schema, compiled. The JSON Schema subset it takes (anything else is refused by name, so
// a reply is never held to less than the schema says):
//   type (a name or a list of names), properties, required, additionalProperties (true, false
//   or a schema), items, minItems, maxItems, minLength, maxLength, pattern (regex.h's syntax;
//   a string with one writes no \u escapes: its characters as UTF-8), minimum, maximum,
//   exclusiveMinimum, exclusiveMaximum (bounded numbers are written without exponents), enum,
//   const, anyOf, oneOf
//   (as anyOf, as llama.cpp does), allOf of one schema, $ref to "#" or a JSON pointer within the
//   document ("#/$defs/Name", "#/definitions/Name", recursion allowed), and the annotations
//   (title, description, default, examples, format, $schema, $id, $comment, deprecated,
//   readOnly, writeOnly). An object whose schema lists properties gets no others unless
//   additionalProperties says so (JSON Schema allows them; a reply is better without), in any
//   order; at most 64 properties an object.
class JsonGrammar {
 public:
  // JSON mode (response_format {"type": "json_object"}): any JSON object.
  static std::shared_ptr<const JsonGrammar> any_object();
  // A JSON Schema document. Errors say which keyword is not supported, and where ("at
  // /properties/age: 'minimum' is not supported").
  static Result<std::shared_ptr<const JsonGrammar>> from_schema(std::string_view schema_json);
  // The reply is exactly one of these texts, as written (vLLM's guided_choice): not JSON.
  static Result<std::shared_ptr<const JsonGrammar>> from_choices(const std::vector<std::string>& choices);
  // The reply is text the regex matches whole (vLLM's guided_regex, as re.fullmatch): not JSON.
  static Result<std::shared_ptr<const JsonGrammar>> from_regex(std::string_view pattern);

  // The same grammar with raw bytes (not JSON) written before and after the value: a tool call's
  // markers, "<tool_call>\n" ... "\n</tool_call>". No whitespace is allowed between the markers
  // and the value.
  static std::shared_ptr<const JsonGrammar> framed(const JsonGrammar& grammar, std::string prefix, std::string suffix,
                                                   std::string description);

  // One piece of a sequence: raw bytes written as they are (a marker such as Mistral's "[ARGS]",
  // possibly a control token's text), or a value of a grammar (a JSON Schema's value, a regex's
  // text; its prefix and suffix included).
  struct Piece {
    std::string raw;
    std::shared_ptr<const JsonGrammar> value;
  };
  // A reply that is one of `alternatives`, each its pieces one after another with no white
  // space between: tool-call formats that are not one JSON value ("get_weather[ARGS]{...}").
  // A regex's text ends where the next piece begins.
  static std::shared_ptr<const JsonGrammar> sequences(const std::vector<std::vector<Piece>>& alternatives,
                                                      std::string description);

  // How an object is written as tagged parameters instead of JSON: each property as
  // `open` NAME `close` VALUE `value_end` (Qwen3-Coder's "<parameter=", ">\n", "\n</parameter>\n").
  struct Tags {
    std::string open, close, value_end;
  };
  // An object grammar's root (a from_schema object with properties, or any_object) written as
  // tagged parameters: in any order, each listed property at most once and the required ones
  // all; other names where the schema allows other keys (their values raw text). A value whose
  // schema allows strings is raw text up to the first `value_end` (which it cannot hold): an
  // enum's texts, or a pattern's, as written; any other value is JSON. Errors when the root is
  // not an object node.
  static Result<std::shared_ptr<const JsonGrammar>> tagged_parameters(const JsonGrammar& object, const Tags& tags,
                                                                      std::string description);

  // What the reply is held to, for messages: "a JSON object", "the JSON schema", "the choices".
  const std::string& description() const { return m_description; }
  const std::string& prefix() const { return m_prefix; }
  const std::string& suffix() const { return m_suffix; }

  // The compiled nodes (json_matcher.cpp walks them).
  enum TypeBit : uint8_t {
    kObject = 1,
    kArray = 2,
    kString = 4,
    kInteger = 8,
    kNumber = 16,  // any number, integers included
    kBoolean = 32,
    kNull = 64,
    kAnyType = 127,
  };
  struct Property {
    std::string key_json;  // the key as a reply writes it, quotes included: "\"name\""
    int32_t node = 0;
    bool is_required = false;
  };
  struct Node {
    uint8_t types = kAnyType;
    std::vector<std::string> literals;  // enum/const: the value is one of these compact JSON texts
                                        // (from_choices: the raw texts)
    std::vector<int32_t> any_of;        // the value fits one of these nodes
    std::vector<Property> properties;
    int32_t additional = -1;  // the node other keys' values fit; -1: no other keys
    int32_t items = 0;        // arrays' elements
    int64_t min_items = 0, max_items = -1;
    int64_t min_length = 0, max_length = -1;  // strings, in characters
    uint64_t required_mask = 0;               // bit i: properties[i] is required
    // Numbers: the bounds a value keeps (JSON Schema's minimum, maximum, exclusive*).
    bool has_minimum = false, has_maximum = false;
    bool is_minimum_exclusive = false, is_maximum_exclusive = false;
    double minimum = 0, maximum = 0;
    bool has_bounds() const { return has_minimum || has_maximum; }
    // Strings: the pattern their text must match. With is_text (from_regex), the value is the
    // reply's raw text held to it, not JSON.
    std::shared_ptr<const Regex> pattern;
    bool is_text = false;
    // Sequences (JsonGrammar::sequences): the value is these nodes' values one after another;
    // a node with `raw` is exactly those bytes.
    std::vector<int32_t> sequence;
    std::string raw;
    // Raw text (UTF-8, no NUL) up to and including the first `until` (a tagged parameter's value),
    // of min_length to max_length characters.
    std::string until;
    // Tagged parameters (JsonGrammar::tagged_parameters): `properties` (key_json: the name and
    // tags.close) and `additional` (the node other names' values fit) written with these tags;
    // `other_key`: the node an other name fits (raw text up to tags.close).
    std::string tag_open;
    int32_t other_key = -1;
  };
  static constexpr int32_t kAnyNode = 0;  // node 0 is always "any JSON value"
  const Node& node(int32_t index) const { return m_nodes[static_cast<size_t>(index)]; }
  int32_t root() const { return m_root; }
  // The types a node's values may have (its anyOf alternatives' together).
  uint8_t types_of(int32_t node) const;

  // Built by the compiler in json_grammar.cpp.
  JsonGrammar(std::vector<Node> nodes, int32_t root, std::string description)
      : m_nodes(std::move(nodes)), m_root(root), m_description(std::move(description)) {}

 private:
  std::vector<Node> m_nodes;
  int32_t m_root = 0;
  std::string m_description;
  std::string m_prefix, m_suffix;
};

// One reply's place in a grammar. Copyable (a copy is a what-if). Alternatives of anyOf, and
// keys that could be a listed property or another, are followed side by side until the bytes
// tell them apart.
class JsonMatcher {
 public:
  // `lead`: raw bytes the reply must write before the grammar's own prefix (a tool call's
  // trigger when the reply must open with a call).
  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> grammar, std::string_view lead = {});

  // Takes the bytes if they continue a valid reply; otherwise returns false and stays as it was.
  // `is_raw_only`: only a raw piece (a framed grammar's prefix or suffix, a sequence's marker)
  // may take them: a control token's text is a marker, never part of a JSON value or a text.
  bool feed(std::string_view bytes, bool is_raw_only = false);
  // Whether feed(bytes) would take them (the matcher unchanged either way).
  bool can_feed(std::string_view bytes, bool is_raw_only = false) const;
  // Whether the reply may end here (a whole value has been written).
  bool is_complete() const;
  // The bytes that may come next (none once the value is closed: the reply must end).
  std::bitset<256> next_bytes() const;
  // When the one reading is inside a pattern's text (a guided_regex reply; a string with a
  // pattern, and `bytes` hold no quote, backslash or control byte): whether the bytes may come,
  // checked on the pattern alone without copying the matcher; nullopt elsewhere. The token mask
  // walks every token from one place (pattern_place, PatternWalk in pattern_walk.h).
  std::optional<bool> pattern_takes(std::string_view bytes) const;
  struct PatternPlace;
  std::optional<PatternPlace> pattern_place() const;
  // When the one reading is inside a tagged parameter's raw text of any length, between whole
  // characters (JsonGrammar::Node::until): the text's end and how many of its bytes end the text
  // so far. Whole UTF-8 characters (no NUL) that do not complete the end are taken (the token
  // mask's fast path); nullopt elsewhere.
  struct RawText {
    std::string_view end;
    int64_t matched = 0;
  };
  std::optional<RawText> raw_text() const;
  // When every reading is inside a string's text (not a key, not mid-character or mid-escape):
  // how many more plain characters the string may take (INT64_MAX: any number); else -1.
  int64_t string_room() const;

  // A frame of the matcher's stack (public for json_matcher.cpp's helpers).
  struct Frame {
    // Raw: bytes written as they are (a framed grammar's prefix and suffix): `text`, `count` of
    // them written. Text: a from_regex reply's UTF-8 text, held to its node's pattern.
    // Until: raw text up to its node's `until` (count: how many of its bytes end the text so far).
    // Tagged: tagged parameters (phase: between them, in the opening tag, after the name).
    enum class Kind : uint8_t {
      Value,
      Object,
      Array,
      String,
      Number,
      Literal,
      Raw,
      Text,
      Until,
      Tagged
    } kind = Kind::Value;
    uint8_t phase = 0;
    bool is_key = false;                        // a String or Literal frame that is an object's key
    int8_t utf8_left = 0;                       // String: continuation bytes still to come; unicode escape digits
    uint8_t next_low = 0x80, next_high = 0xBF;  // String: the range of the next continuation byte
    int32_t node = 0;                           // the grammar node (Object: its object node; key frames: the object's)
    int32_t current = -1;             // Object, Tagged: the property whose value comes next (-1: another key);
                                      // String: 1 once a \u escape began with D (no surrogates)
    int64_t count = 0;                // items, characters, digits, or a literal's bytes so far
    uint64_t seen = 0;                // Object, Tagged: properties written so far; Until: characters
    std::vector<int32_t> candidates;  // Literal: the texts still matching
    std::string text;                 // String key: its bytes so far (an other key may not be a listed
                                      // one); Number with bounds: its text so far; Raw: its bytes
    Regex::States regex;              // String with a pattern, Text: where its characters are in it
    uint32_t code = 0;                // String with a pattern, Text: the character being written
  };
  struct Path {
    std::vector<Frame> stack;
    int32_t whitespace_run = 0;  // the whitespace just written (json_matcher.cpp's rule)
  };
  // Where a pattern's text stands (pattern_place): its regex, the text's frame (its NFA states,
  // characters so far, a character not yet whole), the characters it may have (-1: any), and
  // whether it is a JSON string's (whose quote, backslash and control bytes are JSON's own).
  struct PatternPlace {
    const Regex* regex = nullptr;
    Frame frame;
    int64_t max_length = -1;
    bool is_in_string = false;
  };

 private:
  std::shared_ptr<const JsonGrammar> m_grammar;
  std::vector<Path> m_paths;  // every way the bytes so far can be read; empty never (feed refuses)
};

}  // namespace iwb
