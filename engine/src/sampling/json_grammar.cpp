// JsonGrammar: a JSON Schema document compiled into nodes (json_grammar.h lists the subset).
// Each schema object becomes one node, compiled once even when several $refs name it, so
// recursive schemas compile to a finite graph.
#include "iwb/engine/sampling/json_grammar.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <set>

namespace iwb {
namespace {

using json = nlohmann::json;
using Node = JsonGrammar::Node;

// Node 0 of every grammar: any JSON value (objects of any keys, arrays of anything).
Node any_value_node() {
  Node any;
  any.additional = JsonGrammar::kAnyNode;
  any.items = JsonGrammar::kAnyNode;
  return any;
}

// Keywords that say nothing about which values fit. `format` is one in JSON Schema 2020-12
// unless a validator opts in; replies are not checked against it.
const std::set<std::string> kAnnotations = {
    "title",    "description", "default",  "examples",  "format", "$schema",     "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",  "definitions", "$anchor",
};

// Keywords that constrain a value and are compiled here.
const std::set<std::string> kSupported = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
};

Status unsupported(const std::string& where, const std::string& message) {
  return make_error(ErrorCode::InvalidArgument, "at " + (where.empty() ? std::string("/") : where) + ": " + message);
}

// RFC 6901: "~1" is "/", "~0" is "~".
std::string unescape_pointer_token(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += token[i];
    }
  }
  return out;
}

class Compiler {
 public:
  explicit Compiler(const json& document) : m_document(document) { m_nodes.push_back(any_value_node()); }

  Result<int32_t> compile(const json& schema, const std::string& where) {
    // Each level is a call here; a schema from a file could nest deep enough to overflow the stack.
    struct Depth {
      int& depth;
      explicit Depth(int& d) : depth(++d) {}
      ~Depth() { --depth; }
    } depth(m_depth);
    if (m_depth > kMaxDepth)
      return unsupported(where, "the schema nests deeper than " + std::to_string(kMaxDepth) + " levels");
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return JsonGrammar::kAnyNode;
      return unsupported(where, "the schema 'false' admits no value");
    }
    if (!schema.is_object()) return unsupported(where, "a schema is an object or true/false, not " + schema.dump());
    if (const auto it = m_compiled.find(&schema); it != m_compiled.end()) return it->second;
    for (const auto& [key, value] : schema.items()) {
      if (kAnnotations.count(key) == 0 && kSupported.count(key) == 0) {
        return unsupported(where, "'" + key + "' is not supported");
      }
    }
    // Keywords beside $ref, anyOf/oneOf and allOf would each have to hold as well.
    const auto constraining_besides = [&](const char* keyword) {
      for (const auto& [key, value] : schema.items()) {
        if (key != keyword && kSupported.count(key) != 0) return key;
      }
      return std::string();
    };
    if (schema.contains("$ref")) {
      if (const std::string other = constraining_besides("$ref"); !other.empty()) {
        return unsupported(where, "'" + other + "' beside '$ref' is not supported");
      }
      return compile_ref(schema["$ref"], where);
    }
    if (schema.contains("allOf")) {
      const json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1) return unsupported(where, "'allOf' is supported with one schema only");
      if (const std::string other = constraining_besides("allOf"); !other.empty()) {
        return unsupported(where, "'" + other + "' beside 'allOf' is not supported");
      }
      return compile(all[0], where + "/allOf/0");
    }

    const auto index = static_cast<int32_t>(m_nodes.size());
    m_nodes.emplace_back();
    m_compiled[&schema] = index;  // before the children: a $ref back here finds it
    Node n;
    for (const char* keyword : {"anyOf", "oneOf"}) {
      if (!schema.contains(keyword)) continue;
      if (const std::string other = constraining_besides(keyword); !other.empty()) {
        return unsupported(where, "'" + other + "' beside '" + keyword + "' is not supported");
      }
      const json& list = schema[keyword];
      if (!list.is_array() || list.empty())
        return unsupported(where, std::string("'") + keyword + "' takes a non-empty list");
      for (size_t i = 0; i < list.size(); ++i) {
        Result<int32_t> alt = compile(list[i], where + "/" + keyword + "/" + std::to_string(i));
        if (!alt) return alt.status();
        n.any_of.push_back(*alt);
      }
      m_nodes[static_cast<size_t>(index)] = std::move(n);
      return index;
    }
    IWB_RETURN_IF_ERROR(read_type(schema, where, &n));
    IWB_RETURN_IF_ERROR(read_literals(schema, where, &n));
    IWB_RETURN_IF_ERROR(read_object(schema, where, &n));
    IWB_RETURN_IF_ERROR(read_array(schema, where, &n));
    IWB_RETURN_IF_ERROR(read_bounds(schema, "minLength", "maxLength", where, &n.min_length, &n.max_length));
    IWB_RETURN_IF_ERROR(read_number_bounds(schema, where, &n));
    IWB_RETURN_IF_ERROR(read_pattern(schema, where, &n));
    m_nodes[static_cast<size_t>(index)] = std::move(n);
    return index;
  }

  std::vector<Node> take_nodes() { return std::move(m_nodes); }

 private:
  Result<int32_t> compile_ref(const json& ref, const std::string& where) {
    if (!ref.is_string()) return unsupported(where, "'$ref' is a string");
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#')
      return unsupported(where, "'$ref' " + r + " is outside this document (only \"#...\" is supported)");
    const json* target = &m_document;
    size_t start = 1;
    if (r.size() > 1) {
      if (r[1] != '/') return unsupported(where, "'$ref' " + r + " is not a JSON pointer (\"#/$defs/Name\")");
      start = 2;
      while (start <= r.size()) {
        const size_t end = std::min(r.find('/', start), r.size());
        const std::string token = unescape_pointer_token(r.substr(start, end - start));
        if (target->is_object() && target->contains(token)) {
          target = &(*target)[token];
        } else if (target->is_array() && !token.empty() && token.size() <= 9 &&
                   token.find_first_not_of("0123456789") == std::string::npos && std::stoull(token) < target->size()) {
          target = &(*target)[std::stoull(token)];
        } else {
          return unsupported(where, "'$ref' " + r + " names nothing in the document");
        }
        start = end + 1;
      }
    }
    // A schema compiled already (or being compiled: recursion through its properties or items)
    // is that node; a $ref reached again before any schema is a loop that admits nothing.
    if (const auto it = m_compiled.find(target); it != m_compiled.end()) return it->second;
    if (m_resolving.count(r) != 0)
      return unsupported(where, "'$ref' " + r + " refers to itself without a value between");
    m_resolving.insert(r);
    Result<int32_t> out = compile(*target, r.substr(1));
    m_resolving.erase(r);
    return out;
  }

  // A string's `pattern` (ECMA-262, matched anywhere in the string unless anchored, as JSON
  // Schema says): the string is followed through the pattern's NFA character by character.
  static Status read_pattern(const json& schema, const std::string& where, Node* n) {
    const auto it = schema.find("pattern");
    if (it == schema.end()) return {};
    if (!it->is_string()) return unsupported(where, "'pattern' is a string");
    Result<std::shared_ptr<const Regex>> regex = Regex::compile(it->get<std::string>(), Regex::Mode::Search);
    if (!regex) return unsupported(where, regex.error_message());
    n->pattern = std::move(*regex);
    return {};
  }

  static Status read_type(const json& schema, const std::string& where, Node* n) {
    const auto bit = [](const std::string& name) -> uint8_t {
      if (name == "object") return JsonGrammar::kObject;
      if (name == "array") return JsonGrammar::kArray;
      if (name == "string") return JsonGrammar::kString;
      if (name == "integer") return JsonGrammar::kInteger;
      if (name == "number") return JsonGrammar::kNumber;
      if (name == "boolean") return JsonGrammar::kBoolean;
      if (name == "null") return JsonGrammar::kNull;
      return 0;
    };
    if (!schema.contains("type")) {
      // No type: the keywords present say what kind of value is meant (a reply of another
      // kind would fit the schema too, but is not what its author had in mind).
      const auto has = [&](std::initializer_list<const char*> keys) {
        for (const char* k : keys) {
          if (schema.contains(k)) return true;
        }
        return false;
      };
      if (has({"properties", "required", "additionalProperties"}))
        n->types = JsonGrammar::kObject;
      else if (has({"items", "minItems", "maxItems"}))
        n->types = JsonGrammar::kArray;
      else if (has({"minLength", "maxLength", "pattern"}))
        n->types = JsonGrammar::kString;
      else if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}))
        n->types = JsonGrammar::kNumber;
      return {};
    }
    const json& t = schema["type"];
    std::vector<std::string> names;
    if (t.is_string()) {
      names.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const json& x : t) {
        if (!x.is_string()) return unsupported(where, "'type' lists names, not " + x.dump());
        names.push_back(x.get<std::string>());
      }
    } else {
      return unsupported(where, "'type' is a name or a list of names");
    }
    n->types = 0;
    for (const std::string& name : names) {
      const uint8_t b = bit(name);
      if (b == 0) return unsupported(where, "unknown type '" + name + "'");
      n->types |= b;
    }
    return {};
  }

  static bool fits_type(const json& v, uint8_t types) {
    if (v.is_object()) return (types & JsonGrammar::kObject) != 0;
    if (v.is_array()) return (types & JsonGrammar::kArray) != 0;
    if (v.is_string()) return (types & JsonGrammar::kString) != 0;
    if (v.is_boolean()) return (types & JsonGrammar::kBoolean) != 0;
    if (v.is_null()) return (types & JsonGrammar::kNull) != 0;
    if (v.is_number_integer() || v.is_number_unsigned())
      return (types & (JsonGrammar::kInteger | JsonGrammar::kNumber)) != 0;
    return (types & JsonGrammar::kNumber) != 0;
  }

  static Status read_literals(const json& schema, const std::string& where, Node* n) {
    std::vector<json> values;
    if (schema.contains("const")) values.push_back(schema["const"]);
    if (schema.contains("enum")) {
      const json& e = schema["enum"];
      if (!e.is_array() || e.empty()) return unsupported(where, "'enum' takes a non-empty list");
      if (!values.empty()) return unsupported(where, "'const' beside 'enum' is not supported");
      values.assign(e.begin(), e.end());
    }
    if (values.empty()) return {};
    for (const json& v : values) {
      if (fits_type(v, n->types)) n->literals.push_back(v.dump());
    }
    if (n->literals.empty()) return unsupported(where, "no value of 'enum'/'const' has the schema's 'type'");
    return {};
  }

  static Status read_bounds(const json& schema, const char* min_key, const char* max_key, const std::string& where,
                            int64_t* min, int64_t* max) {
    for (const char* key : {min_key, max_key}) {
      if (!schema.contains(key)) continue;
      const json& v = schema[key];
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
        return unsupported(where, std::string("'") + key + "' is a whole number >= 0");
      }
      // Past int64 is as good as no limit (and get<int64_t> would wrap it negative).
      const int64_t x =
          v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX} ? INT64_MAX : v.get<int64_t>();
      (key == min_key ? *min : *max) = x;
    }
    if (*max >= 0 && *max < *min) {
      return unsupported(where, std::string("'") + max_key + "' is below '" + min_key + "': no value fits");
    }
    return {};
  }

  // minimum/maximum and the 2019+ exclusiveMinimum/exclusiveMaximum (numbers; draft 4's
  // boolean form is refused by name). The tighter of minimum and exclusiveMinimum wins.
  static Status read_number_bounds(const json& schema, const std::string& where, Node* n) {
    const auto read = [&](const char* key, bool* has, double* value, bool* exclusive, bool is_exclusive,
                          bool is_lower) -> Status {
      if (!schema.contains(key)) return {};
      const json& v = schema[key];
      if (v.is_boolean())
        return unsupported(
            where, std::string("'") + key + "' as true/false (draft 4) is not supported; give the bound as a number");
      if (!v.is_number()) return unsupported(where, std::string("'") + key + "' is a number");
      const double x = v.get<double>();
      const bool tighter = !*has || (is_lower ? (x > *value || (x == *value && is_exclusive))
                                              : (x < *value || (x == *value && is_exclusive)));
      if (tighter) {
        *has = true;
        *value = x;
        *exclusive = is_exclusive;
      }
      return {};
    };
    IWB_RETURN_IF_ERROR(read("minimum", &n->has_minimum, &n->minimum, &n->is_minimum_exclusive, false, true));
    IWB_RETURN_IF_ERROR(read("exclusiveMinimum", &n->has_minimum, &n->minimum, &n->is_minimum_exclusive, true, true));
    IWB_RETURN_IF_ERROR(read("maximum", &n->has_maximum, &n->maximum, &n->is_maximum_exclusive, false, false));
    IWB_RETURN_IF_ERROR(read("exclusiveMaximum", &n->has_maximum, &n->maximum, &n->is_maximum_exclusive, true, false));
    if (n->has_minimum && n->has_maximum &&
        (n->maximum < n->minimum ||
         (n->maximum == n->minimum && (n->is_minimum_exclusive || n->is_maximum_exclusive)))) {
      return unsupported(where, "the number bounds leave no value");
    }
    return {};
  }

  Status read_object(const json& schema, const std::string& where, Node* n) {
    const bool has_properties = schema.contains("properties");
    if (has_properties) {
      const json& props = schema["properties"];
      if (!props.is_object()) return unsupported(where, "'properties' is an object");
      if (props.size() > 64) return unsupported(where, "more than 64 properties in one object is not supported");
      for (const auto& [name, sub] : props.items()) {
        Result<int32_t> node = compile(sub, where + "/properties/" + name);
        if (!node) return node.status();
        n->properties.push_back({json(name).dump(), *node, false});
      }
    }
    if (schema.contains("required")) {
      const json& req = schema["required"];
      if (!req.is_array()) return unsupported(where, "'required' is a list of names");
      for (const json& name : req) {
        if (!name.is_string()) return unsupported(where, "'required' is a list of names");
        const std::string key = json(name.get<std::string>()).dump();
        bool found = false;
        for (size_t i = 0; i < n->properties.size(); ++i) {
          if (n->properties[i].key_json == key) {
            n->properties[i].is_required = true;
            n->required_mask |= uint64_t{1} << i;
            found = true;
          }
        }
        if (!found) {
          return unsupported(where,
                             "'required' names '" + name.get<std::string>() + "', which 'properties' does not list");
        }
      }
    }
    // Listed properties and nothing said: no other keys (see json_grammar.h).
    n->additional = has_properties ? -1 : JsonGrammar::kAnyNode;
    if (schema.contains("additionalProperties")) {
      const json& extra = schema["additionalProperties"];
      if (extra.is_boolean()) {
        n->additional = extra.get<bool>() ? JsonGrammar::kAnyNode : -1;
      } else {
        Result<int32_t> node = compile(extra, where + "/additionalProperties");
        if (!node) return node.status();
        n->additional = *node;
      }
    }
    return {};
  }

  Status read_array(const json& schema, const std::string& where, Node* n) {
    if (schema.contains("items")) {
      const json& items = schema["items"];
      if (items.is_array()) return unsupported(where, "'items' as a list (tuples) is not supported");
      Result<int32_t> node = compile(items, where + "/items");
      if (!node) return node.status();
      n->items = *node;
    }
    return read_bounds(schema, "minItems", "maxItems", where, &n->min_items, &n->max_items);
  }

  static constexpr int kMaxDepth = 64;  // as the server's request bodies
  const json& m_document;
  int m_depth = 0;
  std::vector<Node> m_nodes;
  std::map<const json*, int32_t> m_compiled;
  std::set<std::string> m_resolving;  // $refs being followed now: one reached again is a loop
};

// Whether a node reaches itself through anyOf alternatives alone (depth-first, three colours).
bool has_alternative_cycle(const std::vector<Node>& nodes) {
  std::vector<uint8_t> state(nodes.size(), 0);  // 0 unseen, 1 on the path, 2 done
  const std::function<bool(size_t)> visit = [&](size_t i) {
    if (state[i] == 1) return true;
    if (state[i] == 2) return false;
    state[i] = 1;
    for (const int32_t alt : nodes[i].any_of) {
      if (visit(static_cast<size_t>(alt))) return true;
    }
    state[i] = 2;
    return false;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (visit(i)) return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<const JsonGrammar> JsonGrammar::any_object() {
  const Node any = any_value_node();
  Node object = any;
  object.types = kObject;
  return std::make_shared<const JsonGrammar>(std::vector<Node>{any, object}, 1, "a JSON object");
}

std::shared_ptr<const JsonGrammar> JsonGrammar::framed(const JsonGrammar& grammar, std::string prefix,
                                                       std::string suffix, std::string description) {
  auto out = std::make_shared<JsonGrammar>(grammar.m_nodes, grammar.m_root, std::move(description));
  out->m_prefix = std::move(prefix);
  out->m_suffix = std::move(suffix);
  return out;
}

std::shared_ptr<const JsonGrammar> JsonGrammar::sequences(const std::vector<std::vector<Piece>>& alternatives,
                                                          std::string description) {
  std::vector<Node> nodes = {any_value_node(), Node{}};  // 1: the root, anyOf the alternatives
  nodes[1].types = 0;
  const auto add_raw = [&](const std::string& bytes, std::vector<int32_t>* sequence) {
    if (bytes.empty()) return;
    Node raw;
    raw.types = 0;
    raw.raw = bytes;
    sequence->push_back(static_cast<int32_t>(nodes.size()));
    nodes.push_back(std::move(raw));
  };
  for (const std::vector<Piece>& pieces : alternatives) {
    std::vector<int32_t> sequence;
    for (const Piece& piece : pieces) {
      if (!piece.value) {
        add_raw(piece.raw, &sequence);
        continue;
      }
      // The value's nodes appended, their links moved along; its node 0 ("any value") is ours.
      const std::vector<Node>& from = piece.value->m_nodes;
      const auto base = static_cast<int32_t>(nodes.size()) - 1;
      const auto moved = [&](int32_t i) { return i <= 0 ? i : i + base; };
      for (size_t i = 1; i < from.size(); ++i) {
        Node n = from[i];
        for (int32_t& alt : n.any_of) alt = moved(alt);
        for (Property& property : n.properties) property.node = moved(property.node);
        for (int32_t& element : n.sequence) element = moved(element);
        n.additional = moved(n.additional);
        n.items = moved(n.items);
        n.other_key = moved(n.other_key);
        nodes.push_back(std::move(n));
      }
      add_raw(piece.value->m_prefix, &sequence);
      sequence.push_back(moved(piece.value->m_root));
      add_raw(piece.value->m_suffix, &sequence);
    }
    if (sequence.empty()) continue;
    Node alternative;
    alternative.types = 0;
    alternative.sequence = std::move(sequence);
    nodes[1].any_of.push_back(static_cast<int32_t>(nodes.size()));
    nodes.push_back(std::move(alternative));
  }
  return std::make_shared<const JsonGrammar>(std::move(nodes), 1, std::move(description));
}

namespace {

// The types a value of `node` may have, its alternatives' together.
uint8_t value_types(const std::vector<Node>& nodes, int32_t node, int depth = 0) {
  const Node& n = nodes[static_cast<size_t>(node)];
  if (n.any_of.empty() || depth > 8) return n.types;
  uint8_t types = 0;
  for (const int32_t alternative : n.any_of) types |= value_types(nodes, alternative, depth + 1);
  return types;
}

// A tagged parameter's value: raw text where the schema allows a string (an enum's texts, a
// pattern's text, else any text up to the end tag), else the JSON value and then the end tag.
int32_t tagged_value(std::vector<Node>* nodes, int32_t node, const std::string& value_end) {
  const auto add = [&](Node n) {
    nodes->push_back(std::move(n));
    return static_cast<int32_t>(nodes->size()) - 1;
  };
  Node end;
  end.types = 0;
  end.raw = value_end;
  const Node n = (*nodes)[static_cast<size_t>(node)];
  bool are_literals_strings = !n.literals.empty();
  for (const std::string& literal : n.literals) are_literals_strings = are_literals_strings && literal[0] == '"';
  if (are_literals_strings) {
    Node texts;
    texts.types = 0;
    for (const std::string& literal : n.literals)
      texts.literals.push_back(json::parse(literal).get<std::string>() + value_end);
    return add(std::move(texts));
  }
  Node sequence;
  sequence.types = 0;
  if (n.literals.empty() && (value_types(*nodes, node) & JsonGrammar::kString) == 0) {
    sequence.sequence = {node, add(std::move(end))};
    return add(std::move(sequence));
  }
  if (n.literals.empty() && n.any_of.empty() && n.types == JsonGrammar::kString && n.pattern) {
    Node text;
    text.types = 0;
    text.is_text = true;
    text.pattern = n.pattern;
    const int32_t text_node = add(std::move(text));
    sequence.sequence = {text_node, add(std::move(end))};
    return add(std::move(sequence));
  }
  Node until;
  until.types = 0;
  until.until = value_end;
  if (n.any_of.empty()) {  // a string's length limits hold for its text
    until.min_length = n.min_length;
    until.max_length = n.max_length;
  }
  return add(std::move(until));
}

}  // namespace

uint8_t JsonGrammar::types_of(int32_t node) const { return value_types(m_nodes, node); }

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::tagged_parameters(const JsonGrammar& object, const Tags& tags,
                                                                          std::string description) {
  const Node& root = object.node(object.root());
  if (root.types != kObject || !root.any_of.empty() || !root.literals.empty() || tags.open.empty() ||
      tags.close.empty() || tags.value_end.empty()) {
    return make_error(ErrorCode::InvalidArgument, "tagged parameters need an object schema");
  }
  std::vector<Node> nodes = object.m_nodes;
  Node tagged;
  tagged.types = 0;
  tagged.tag_open = tags.open;
  tagged.required_mask = root.required_mask;
  for (const Property& property : root.properties) {
    const std::string name = json::parse(property.key_json).get<std::string>();
    tagged.properties.push_back(
        {name + tags.close, tagged_value(&nodes, property.node, tags.value_end), property.is_required});
  }
  if (root.additional >= 0) {
    Node any_text;
    any_text.types = 0;
    any_text.until = tags.value_end;
    nodes.push_back(std::move(any_text));
    tagged.additional = static_cast<int32_t>(nodes.size()) - 1;
    Node name;
    name.types = 0;
    name.until = tags.close;
    name.min_length = 1;
    nodes.push_back(std::move(name));
    tagged.other_key = static_cast<int32_t>(nodes.size()) - 1;
  }
  nodes.push_back(std::move(tagged));
  const auto root_index = static_cast<int32_t>(nodes.size()) - 1;
  return std::make_shared<const JsonGrammar>(std::move(nodes), root_index, std::move(description));
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_choices(const std::vector<std::string>& choices) {
  if (choices.empty()) return make_error(ErrorCode::InvalidArgument, "the list of choices is empty");
  const Node any = any_value_node();
  Node root;
  for (const std::string& c : choices) {
    if (c.empty()) return make_error(ErrorCode::InvalidArgument, "a choice is empty: a reply must say something");
    root.literals.push_back(c);
  }
  return std::make_shared<const JsonGrammar>(std::vector<Node>{any, root}, 1, "the choices");
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_regex(std::string_view pattern) {
  Result<std::shared_ptr<const Regex>> regex = Regex::compile(pattern, Regex::Mode::FullMatch);
  if (!regex) return make_error(ErrorCode::InvalidArgument, "the regex " + regex.error_message());
  const Node any = any_value_node();
  Node root;
  root.types = 0;
  root.is_text = true;
  root.pattern = std::move(*regex);
  return std::make_shared<const JsonGrammar>(std::vector<Node>{any, root}, 1, "the regex");
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_schema(std::string_view schema_json) {
  json document;
  try {
    document = json::parse(schema_json);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers past a double
    return make_error(ErrorCode::InvalidArgument, std::string("the JSON schema is not valid JSON: ") + e.what());
  }
  Compiler compiler(document);
  Result<int32_t> root = compiler.compile(document, "");
  if (!root) return make_error(ErrorCode::InvalidArgument, "JSON schema " + root.error_message());
  std::vector<Node> nodes = compiler.take_nodes();
  if (has_alternative_cycle(nodes)) {
    // {"anyOf": [{"$ref": "#/$defs/a"}, ...]} inside $defs/a: choosing an alternative would
    // never reach a value (the matcher would recurse forever).
    return make_error(ErrorCode::InvalidArgument,
                      "JSON schema: an 'anyOf'/'oneOf' reaches itself through its alternatives before any value");
  }
  return std::make_shared<const JsonGrammar>(std::move(nodes), *root, "the JSON schema");
}

}  // namespace iwb
