// Structured output's byte automaton (json_grammar.h): documents that fit are taken byte by
// byte, each kind of mistake is refused at the byte that makes it, schemas outside the subset
// are refused by name, and random walks through whatever the matcher allows always end in
// JSON that nlohmann parses and a small independent validator (below) accepts.
#include "grammar_checks.h"
#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/token_constraint.h"

#include <QtTest>

#include <nlohmann/json.hpp>

#include <random>

using namespace iwb;
using namespace iwb::test;
using json = nlohmann::json;

class TestJsonGrammar : public QObject {
  Q_OBJECT

 private slots:
  void jsonModeTakesAnyObject();
  void completenessAndTheEnd();
  void whitespaceAndDigitsAreBounded();
  void objectsFollowTheSchema();
  void refsRecurseAndAlternativesSplit();
  void unionsAndOtherKeys();
  void boundedNumbers();
  void choicesAreTakenAsWritten();
  void unsupportedSchemasAreRefusedByName();
  void randomWalksEndInValidJson();
  void tokenMaskAgreesWithFeedingEachToken();
  void sequencesHoldMarkersAndValues();
};

namespace {

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 5},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
    "role": {"enum": ["admin", "user", 3]},
    "nick": {"type": ["string", "null"]}
  },
  "required": ["name", "age"]
})";

const char* kTreeSchema = R"({
  "$defs": {
    "node": {
      "type": "object",
      "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}
      },
      "required": ["value"]
    }
  },
  "$ref": "#/$defs/node"
})";

const char* kBoundsSchema = R"({
  "type": "object",
  "properties": {
    "rating": {"type": "integer", "minimum": 1, "maximum": 5},
    "share": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "delta": {"type": "number", "minimum": -2.5, "exclusiveMaximum": 100},
    "year": {"type": "integer", "minimum": 1900, "maximum": 2100}
  },
  "required": ["rating", "share", "delta", "year"]
})";

const char* kUnionSchema = R"({
  "type": "object",
  "properties": {
    "shape": {"anyOf": [
      {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]},
      {"type": "object", "properties": {"w": {"type": "number"}, "h": {"type": "number"}}, "required": ["w", "h"]},
      {"const": "none"}
    ]},
    "extra": {"type": "object", "additionalProperties": {"type": "boolean"}}
  },
  "required": ["shape", "extra"]
})";

std::shared_ptr<const JsonGrammar> compile(const char* schema) {
  Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_schema(schema);
  if (!g) qFatal("schema refused: %s", g.error_message().c_str());
  return *g;
}

// An independent check of the same subset on parsed JSON.
bool validates(const json& schema, const json& root, const json& v) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"].get<std::string>().substr(1);
    return validates(ref.empty() ? root : root.at(json::json_pointer(ref)), root, v);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    for (const json& alt : schema[key]) {
      if (validates(alt, root, v)) return true;
    }
    return false;
  }
  if (schema.contains("const") && v != schema["const"]) return false;
  if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), v) == schema["enum"].end()) {
    return false;
  }
  if (schema.contains("type")) {
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool any = false;
    for (const json& t : types) {
      const std::string n = t.get<std::string>();
      any = any || (n == "object" && v.is_object()) || (n == "array" && v.is_array()) ||
            (n == "string" && v.is_string()) || (n == "integer" && (v.is_number_integer() || v.is_number_unsigned())) ||
            (n == "number" && v.is_number()) || (n == "boolean" && v.is_boolean()) || (n == "null" && v.is_null());
    }
    if (!any) return false;
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& r : schema.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!validates(props[k], root, x)) return false;
      } else if (schema.contains("additionalProperties")) {
        if (!validates(schema["additionalProperties"], root, x)) return false;
      } else if (schema.contains("properties")) {
        return false;  // the grammar's rule: listed properties and nothing said, no others
      }
    }
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) return false;
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return false;
    for (const json& x : v) {
      if (schema.contains("items") && !validates(schema["items"], root, x)) return false;
    }
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (schema.contains("minimum") && x < schema["minimum"].get<double>()) return false;
    if (schema.contains("maximum") && x > schema["maximum"].get<double>()) return false;
    if (schema.contains("exclusiveMinimum") && x <= schema["exclusiveMinimum"].get<double>()) return false;
    if (schema.contains("exclusiveMaximum") && x >= schema["exclusiveMaximum"].get<double>()) return false;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    size_t chars = 0;
    for (const char c : s) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
    if (schema.contains("minLength") && chars < schema["minLength"].get<size_t>()) return false;
    if (schema.contains("maxLength") && chars > schema["maxLength"].get<size_t>()) return false;
  }
  return true;
}

// One reply written by picking among the bytes the matcher allows at random, leaning towards
// closing bytes after a while so that it ends.
std::string random_walk(const std::shared_ptr<const JsonGrammar>& g, std::mt19937& rng, bool* ended, bool* stuck) {
  JsonMatcher m(g);
  std::string out;
  *ended = false;
  *stuck = false;
  for (int step = 0; step < 4000; ++step) {
    const std::bitset<256> next = m.next_bytes();
    if (m.is_complete() && (next.none() || rng() % 4 == 0)) {
      *ended = true;
      return out;
    }
    if (next.none()) {  // stuck: neither whole nor able to go on; a matcher must never get here
      qWarning("stuck after: %s", out.c_str());
      *stuck = true;
      return out;
    }
    std::vector<int> choices;
    if (step > 24) {
      for (const int b : {'"', '}', ']', '1', 'n', 't', 'f'}) {
        if (next.test(static_cast<size_t>(b))) choices.push_back(b);
      }
    }
    if (choices.empty() || rng() % 3 == 0) {
      choices.clear();
      for (int b = 0; b < 256; ++b) {
        if (next.test(static_cast<size_t>(b))) choices.push_back(b);
      }
    }
    const char c = static_cast<char>(choices[rng() % choices.size()]);
    if (!m.feed(std::string_view(&c, 1))) return out;  // next_bytes promised it
    out += c;
  }
  return out;
}

}  // namespace

void TestJsonGrammar::jsonModeTakesAnyObject() {
  const auto g = JsonGrammar::any_object();
  expect_fits(g, R"({})");
  expect_fits(g, R"({"a": [1, -2.5e-3, 0, true, false, null, "x\u00e9\n", {}], "b": {"c": []}})");
  expect_fits(g, "{\n  \"k\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"\n}");
  expect_refused_at(g, R"([1])", '[');
  expect_refused_at(g, R"({"a" 1})", '1');
  expect_refused_at(g, R"({"a":1,})", '}');
  expect_refused_at(g, R"({"a":01})", '1');
  expect_refused_at(g, R"({"a":1.})", '}');
  expect_refused_at(g, R"({"a":tru})", '}');
  expect_refused_at(g, "{\"a\":\"\x01\"}", '\x01');
  expect_refused_at(g, R"({"a":"\q"})", 'q');
  expect_refused_at(g, R"({"a":"\ud83d"})", '8');            // half a surrogate pair
  expect_refused_at(g, "{\"a\":\"\xe0\x80\x80\"}", '\x80');  // overlong UTF-8
  expect_refused_at(g, "{\"a\":\"\xc3\"}", '"');             // a character cut short
  expect_refused_at(g, R"({} )", ' ');                       // nothing after the value
}

void TestJsonGrammar::completenessAndTheEnd() {
  const auto g = JsonGrammar::any_object();
  JsonMatcher m(g);
  QVERIFY(!m.is_complete());
  QVERIFY(m.feed(R"({"a": 1)"));
  QVERIFY(!m.is_complete());
  const std::bitset<256> next = m.next_bytes();
  QVERIFY(next.test('}') && next.test(',') && next.test('0') && next.test(' ') && next.test('.'));
  QVERIFY(!next.test(']') && !next.test('"'));
  QVERIFY(m.feed("}"));
  QVERIFY(m.is_complete());
  QVERIFY(m.next_bytes().none());
  // A number at the top is whole as it stands, and may still go on.
  const auto number = compile(R"({"type": "number"})");
  JsonMatcher n(number);
  QVERIFY(n.feed("-12"));
  QVERIFY(n.is_complete());
  QVERIFY(n.next_bytes().test('3') && n.next_bytes().test('.') && n.next_bytes().test('e'));
  QVERIFY(!n.feed("-"));
}

void TestJsonGrammar::whitespaceAndDigitsAreBounded() {
  const auto g = JsonGrammar::any_object();
  // llama.cpp's rule: one space, or a newline and at most 20 spaces or tabs; none at the start.
  QVERIFY(JsonMatcher(g).can_feed("{ "));
  QVERIFY(!JsonMatcher(g).can_feed("{  "));
  QVERIFY(!JsonMatcher(g).can_feed(" {"));
  QVERIFY(!JsonMatcher(g).can_feed("{\r\n"));
  QVERIFY(JsonMatcher(g).can_feed("{\n" + std::string(20, ' ') + "\"a\":\n\t\t"));
  QVERIFY(!JsonMatcher(g).can_feed("{\n" + std::string(21, ' ')));
  QVERIFY(!JsonMatcher(g).can_feed("{\n\n"));
  QVERIFY(!JsonMatcher(g).can_feed("{ \n"));
  QVERIFY(JsonMatcher(g).can_feed("{\"a\":" + std::string(16, '9')));
  QVERIFY(!JsonMatcher(g).can_feed("{\"a\":" + std::string(17, '9')));
  QVERIFY(JsonMatcher(g).can_feed(R"({"a":1.5e-99)"));
  QVERIFY(!JsonMatcher(g).can_feed(R"({"a":1.5e-100)"));  // every number a finite double
}

void TestJsonGrammar::objectsFollowTheSchema() {
  const auto g = compile(kPersonSchema);
  expect_fits(g, R"({"name":"Bob","age":42})");
  expect_fits(g, R"({ "age": -7, "tags": ["x", "y"], "name": "Al", "role": 3, "nick": null, "height": 1.5e2 })");
  expect_fits(g, R"({"role":"admin","name":"Ann","age":0,"nick":"A"})");
  expect_refused_at(g, R"({"name":"Bob"})", '}');                             // age is required
  expect_refused_at(g, R"({"name":"Robert","age":1})", 't');                  // maxLength 5
  expect_refused_at(g, R"({"name":"","age":1})", '"');                        // minLength 1
  expect_refused_at(g, R"({"name":"B","age":4.5})", '.');                     // an integer
  expect_refused_at(g, R"({"name":"B","age":1,"x":1})", 'x');                 // no other keys
  expect_refused_at(g, R"({"name":"B","name":"C","age":1})", 'a');            // no key twice ("n" could be "nick")
  expect_refused_at(g, R"({"name":"B","age":1,"tags":[]})", ']');             // minItems 1
  expect_refused_at(g, R"({"name":"B","age":1,"tags":["a","b","c"]})", ',');  // maxItems 2
  expect_refused_at(g, R"({"name":"B","age":1,"tags":[1]})", '1');
  expect_refused_at(g, R"({"name":"B","age":1,"role":"root"})", 'r');
  expect_refused_at(g, R"({"name":"B","age":1,"nick":true})", 't');
  expect_refused_at(g, R"({"age":1,"name":"B",})", '}');  // no keys left after the comma
}

void TestJsonGrammar::refsRecurseAndAlternativesSplit() {
  const auto tree = compile(kTreeSchema);
  expect_fits(tree, R"({"value":1,"children":[{"value":2},{"value":3,"children":[{"value":4,"children":[]}]}]})");
  expect_refused_at(tree, R"({"value":1,"children":[{"value":2},{"value":3},{"value":4}]})", ',');
  expect_refused_at(tree, R"({"value":1,"children":[{"children":[]}]})", '}');  // value required in a child
}

void TestJsonGrammar::unionsAndOtherKeys() {
  const auto g = compile(kUnionSchema);
  expect_fits(g, R"({"shape":{"r":2},"extra":{}})");
  expect_fits(g, R"({"shape":{"h":1,"w":2},"extra":{"a":true,"name b":false}})");
  expect_fits(g, R"({"extra":{"x":true},"shape":"none"})");
  expect_refused_at(g, R"({"shape":{"r":2,"w":1},"extra":{}})", ',');  // a circle has no more keys
  expect_refused_at(g, R"({"shape":{"w":1},"extra":{}})", '}');
  expect_refused_at(g, R"({"shape":"nothing","extra":{}})", 't');
  expect_refused_at(g, R"({"shape":"none","extra":{"a":1}})", '1');
}

void TestJsonGrammar::boundedNumbers() {
  const auto g = compile(kBoundsSchema);
  expect_fits(g, R"({"rating":1,"share":0.5,"delta":-2.5,"year":1900})");
  expect_fits(g, R"({"rating":5,"share":1,"delta":99.99,"year":2100})");
  expect_fits(g, R"({"rating":3,"share":0.0001,"delta":0,"year":2026})");
  expect_refused_at(g, R"({"rating":0)", '0');
  expect_refused_at(g, R"({"rating":6)", '6');
  expect_refused_at(g, R"({"rating":10)", '0');  // 1 could go on, 10 cannot
  expect_refused_at(g, R"({"rating":-1)", '-');
  expect_refused_at(g, R"({"share":0,)", ',');  // exclusiveMinimum 0: 0 itself never
  expect_refused_at(g, R"({"share":1.5)", '5');
  expect_refused_at(g, R"({"share":2)", '2');
  expect_refused_at(g, R"({"delta":-2.6)", '6');
  expect_refused_at(g, R"({"delta":-3)", '3');
  expect_refused_at(g, R"({"delta":100)", '0');  // exclusiveMaximum 100
  expect_refused_at(g, R"({"delta":1e1)", 'e');  // bounded numbers have no exponent
  expect_refused_at(g, R"({"year":18)", '8');
  expect_refused_at(g, R"({"year":2101)", '1');
  expect_refused_at(g, R"({"year":190,)", ',');  // 190 is a prefix of 1900, not a year
  // The last fraction digit allowed leaves no room: 0.000... (16 zeros) is refused at the 16th.
  expect_refused_at(g, R"({"rating":1,"share":0.0000000000000000)", '0');
  QVERIFY(JsonMatcher(g).can_feed(R"({"rating":1,"share":0.0000000000000001)"));
  // A number at the top: whole only within its bounds.
  const auto top = compile(R"({"type": "integer", "minimum": 10})");
  JsonMatcher m(top);
  QVERIFY(m.feed("1"));
  QVERIFY(!m.is_complete());
  QVERIFY(m.feed("2"));
  QVERIFY(m.is_complete());
}

void TestJsonGrammar::choicesAreTakenAsWritten() {
  auto g = JsonGrammar::from_choices({"positive", "negative", " maybe", "yes", "yes please"});
  QVERIFY(g);
  expect_fits(*g, "positive");
  expect_fits(*g, " maybe");  // a choice may begin with a space
  expect_refused_at(*g, "neutral", 'u');
  expect_refused_at(*g, "positive!", '!');
  JsonMatcher m(*g);
  QVERIFY(m.feed("pos"));
  QVERIFY(!m.is_complete());
  QVERIFY(m.feed("itive"));
  QVERIFY(m.is_complete());
  QVERIFY(m.next_bytes().none());  // the reply ends here
  JsonMatcher yes(*g);
  QVERIFY(yes.feed("yes"));
  QVERIFY(yes.is_complete());
  QVERIFY(yes.next_bytes().test(' '));  // "yes please" may still follow
  QCOMPARE((*g)->description(), std::string("the choices"));
  QVERIFY(!JsonGrammar::from_choices({}));
  QVERIFY(!JsonGrammar::from_choices({"a", ""}));
}

void TestJsonGrammar::unsupportedSchemasAreRefusedByName() {
  struct Case {
    const char* schema;
    const char* message;
  };
  const Case cases[] = {
      {R"({"type":"object","properties":{"age":{"type":"integer","format":"int32","multipleOf":5}}})",
       "at /properties/age: 'multipleOf' is not supported"},
      {"{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookaround"},
      {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "back-references"},
      {R"({"type":"string","pattern":7})", "'pattern' is a string"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "'required' names 'b'"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", "refers to itself"},
      {R"({"$ref":"#/$defs/missing"})", "names nothing"},
      {R"({"$ref":"other.json#/a"})", "outside this document"},
      {R"({"type":"strnig"})", "unknown type 'strnig'"},
      {R"({"enum":[1,2],"type":"string"})", "no value of 'enum'"},
      {R"({"type":"array","items":[{"type":"string"}]})", "tuples"},
      {R"({"type":"string","minLength":5,"maxLength":2})", "no value fits"},
      {R"({"allOf":[{"type":"string"},{"maxLength":3}]})", "'allOf' is supported with one schema only"},
      {R"(false)", "admits no value"},
      {R"({"type":"number","minimum":5,"exclusiveMaximum":5})", "leave no value"},
      {R"({"type":"number","minimum":0,"exclusiveMinimum":true})", "draft 4"},
      {R"({"type":"number","multipleOf":2})", "'multipleOf' is not supported"},
      {R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"string"}]}},"$ref":"#/$defs/a"})",
       "reaches itself through its alternatives"},
      {R"({"type": "object",)", "not valid JSON"},
  };
  std::string deep = "{}";
  for (int i = 0; i < 70; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  Result<std::shared_ptr<const JsonGrammar>> too_deep = JsonGrammar::from_schema(deep);
  QVERIFY(!too_deep);
  QVERIFY2(too_deep.error_message().find("nests deeper than 64 levels") != std::string::npos,
           too_deep.error_message().c_str());
  for (const Case& c : cases) {
    Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_schema(c.schema);
    QVERIFY2(!g, c.schema);
    QVERIFY2(g.error_message().find(c.message) != std::string::npos, g.error_message().c_str());
  }
  // Annotations and an empty schema are fine; {} takes any value.
  const auto any = compile(R"({"title":"t","description":"d","$schema":"x","format":"date","examples":[1]})");
  expect_fits(any, "[1, \"a\", null]");
  expect_fits(any, "\"text\"");
}

void TestJsonGrammar::randomWalksEndInValidJson() {
  std::mt19937 rng(1234);
  for (const char* schema_text : {"{}", kPersonSchema, kTreeSchema, kUnionSchema, kBoundsSchema}) {
    const json schema = json::parse(schema_text);
    const auto g = compile(schema_text);
    int num_ended = 0;
    for (int walk = 0; walk < 150; ++walk) {
      bool ended = false, stuck = false;
      const std::string text = random_walk(g, rng, &ended, &stuck);
      QVERIFY2(!stuck, text.c_str());
      if (!ended) continue;  // ran past the step budget inside a long string; fine
      ++num_ended;
      json value;
      try {
        value = json::parse(text);
      } catch (const json::exception& e) {
        QFAIL(qPrintable(QString("not JSON (%1): %2").arg(e.what(), QString::fromStdString(text))));
      }
      QVERIFY2(validates(schema, schema, value), text.c_str());
    }
    QVERIFY2(num_ended > 100, schema_text);
  }
  // JSON mode's walks end in objects.
  const auto object = JsonGrammar::any_object();
  for (int walk = 0; walk < 100; ++walk) {
    bool ended = false, stuck = false;
    const std::string text = random_walk(object, rng, &ended, &stuck);
    QVERIFY2(!stuck, text.c_str());
    if (ended) QVERIFY2(json::parse(text).is_object(), text.c_str());
  }
}

// The mask's shortcuts (first bytes; plain text inside strings taken on its length) against
// feeding every token to a copy of the matcher, over a vocabulary of random pieces (plain
// words, quotes, escapes, cut and whole UTF-8, control bytes) at the places random walks reach.
void TestJsonGrammar::tokenMaskAgreesWithFeedingEachToken() {
  std::mt19937 rng(99);
  const std::vector<std::string> atoms = {"a",        "ab",
                                          " ",        "\"",
                                          "\\",       "\\n",
                                          "\\u00",    "{",
                                          "}",        "[",
                                          "]",        ",",
                                          ":",        "1",
                                          "-",        ".",
                                          "e",        "\n",
                                          "\t",       "\x01",
                                          "\xc3\xa9", "\xc3",
                                          "\xa9",     "\xe2\x82\xac",
                                          "\xe0\x80", "\xf0\x9f\x98\x80",
                                          "true",     "null",
                                          "\"name\"", "x"};
  std::vector<std::string> pieces = random_pieces(rng, atoms, 3000, 4);
  pieces.push_back("");  // a control token
  std::vector<bool> ends(pieces.size(), false);
  ends.push_back(true);  // an end-of-generation token
  pieces.push_back("");
  // Control tokens shown as text (render_special): markers of the sequence grammar below, and
  // text that fits JSON and strings, which they may never write.
  std::vector<bool> controls(pieces.size(), false);
  for (const char* control : {"[ARGS]", "[CALL_ID]", "{", "\"a\"", "ab", "[TOOL_CALLS]"}) {
    pieces.push_back(control);
    ends.push_back(false);
    controls.push_back(true);
  }
  const TokenBytes tokens(pieces, ends, controls);
  const char* short_strings = R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3},
      "b": {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "string", "minLength": 2}]}}})";
  int num_states = 0, num_in_strings = 0;
  Result<std::shared_ptr<const JsonGrammar>> id = JsonGrammar::from_regex("[a-z]{2,4}");
  QVERIFY(id.is_ok());
  const auto calls =
      JsonGrammar::sequences({{{"f[ARGS]", nullptr}, {"", compile(kPersonSchema)}},
                              {{"f[CALL_ID]", nullptr}, {"", *id}, {"[ARGS]", nullptr}, {"", compile("{}")}}},
                             "a call");
  for (const char* schema_text : {"{}", kPersonSchema, kUnionSchema, short_strings, "sequence"}) {
    const auto g = std::string_view(schema_text) == "sequence" ? calls : compile(schema_text);
    for (int walk = 0; walk < 12; ++walk) {
      bool ended = false, stuck = false;
      const std::string text = random_walk(g, rng, &ended, &stuck);
      // Every prefix of the walk is a place a reply can be.
      for (size_t cut = 0; cut <= text.size(); cut += 1 + rng() % 5) {
        JsonMatcher m(g);
        QVERIFY(m.feed(text.substr(0, cut)));
        expect_mask_agrees(m, tokens, text.substr(0, cut));
        if (QTest::currentTestFailed()) return;
        ++num_states;
        num_in_strings += m.string_room() >= 0;
      }
    }
  }
  QVERIFY(num_states > 200);
  QVERIFY(num_in_strings > 20);  // the string shortcut was exercised
}

// Mistral's calls: name, an optional [CALL_ID] and 9 letters or digits, [ARGS], the arguments.
void TestJsonGrammar::sequencesHoldMarkersAndValues() {
  const auto weather =
      compile("{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}");
  const auto now = compile("{\"type\": \"object\", \"properties\": {}}");
  Result<std::shared_ptr<const JsonGrammar>> id = JsonGrammar::from_regex("[a-zA-Z0-9]{9}");
  QVERIFY(id.is_ok());
  const auto g =
      JsonGrammar::sequences({{{"get_weather[ARGS]", nullptr}, {"", weather}},
                              {{"get_weather[CALL_ID]", nullptr}, {"", *id}, {"[ARGS]", nullptr}, {"", weather}},
                              {{"now[ARGS]", nullptr}, {"", now}}},
                             "a call");
  QCOMPARE(g->description(), std::string("a call"));
  expect_fits(g, "get_weather[ARGS]{\"city\":\"Paris\"}");
  expect_fits(g, "get_weather[ARGS]{\"city\": \"Paris\"}");
  expect_fits(g, "get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\":\"Paris\"}");
  expect_fits(g, "now[ARGS]{}");
  expect_refused_at(g, "now[ARGS] {}", ' ');  // nothing between the pieces
  expect_refused_at(g, "get_weather [ARGS]{}", ' ');
  expect_refused_at(g, "get_weather[ARGS]{}", '}');  // "city" is required
  expect_refused_at(g, "get_time[ARGS]{}", 't');
  expect_refused_at(g, "get_weather[CALL_ID]abc12[ARGS]{}", '[');       // an id of 5
  expect_refused_at(g, "get_weather[CALL_ID]abc123XYZ0[ARGS]{}", '0');  // ... or 10
  expect_refused_at(g, "now[ARGS]{}{}", '{');                           // the reply ends there
  JsonMatcher m(g);
  QVERIFY(m.feed("get_weather"));
  QVERIFY(!m.is_complete());

  // A control token's text may only write a marker: "[ARGS]" after the name, not in a string.
  QVERIFY(m.can_feed("[ARGS]", /*is_raw_only=*/true));
  QVERIFY(!m.can_feed("[ARGS]{", /*is_raw_only=*/true));
  QVERIFY(m.feed("[ARGS]{\"city\":\""));
  QVERIFY(m.can_feed("[ARGS]"));
  QVERIFY(!m.can_feed("[ARGS]", /*is_raw_only=*/true));
  JsonMatcher with_id(g);
  QVERIFY(with_id.feed("get_weather[CALL_ID]abc123XYZ"));
  QVERIFY(with_id.can_feed("[ARGS]", /*is_raw_only=*/true));  // the id's text ends at the marker
  QVERIFY(!with_id.can_feed("0", /*is_raw_only=*/true));

  // The token mask: a control token only at a marker; its text elsewhere is refused.
  const TokenBytes tokens({"get_weather", "[ARGS]", "{", "\"city\":\"", "[ARGS]", "Paris", "\"}", ""},
                          {false, false, false, false, false, false, false, true},
                          {false, true, false, false, false, false, false, false});
  JsonMatcher held(g);
  QVERIFY(held.feed("get_weather"));
  std::vector<float> logits(tokens.size(), 0.0f);
  QCOMPARE(mask_disallowed_tokens(held, tokens, logits), size_t{2});  // "[ARGS]" both ways
  QVERIFY(std::isfinite(logits[1]) && std::isfinite(logits[4]));
  QVERIFY(held.feed("[ARGS]{\"city\":\""));
  std::fill(logits.begin(), logits.end(), 0.0f);
  mask_disallowed_tokens(held, tokens, logits);
  QVERIFY(!std::isfinite(logits[1]));  // the control token: not inside the string
  QVERIFY(std::isfinite(logits[4]) && std::isfinite(logits[5]));
  QVERIFY(!is_token_allowed(held, tokens, 1));
  QVERIFY(is_token_allowed(held, tokens, 5));
}

QTEST_GUILESS_MAIN(TestJsonGrammar)
#include "test_json_grammar.moc"
