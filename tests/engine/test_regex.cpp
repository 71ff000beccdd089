// Regexes for structured output (regex.h): the NFA against std::regex's ECMAScript engine as the
// reference on random ASCII texts; patterns in JSON schemas and vLLM's guided_regex through the
// matcher, multi-byte characters included; random walks over the bytes the matcher allows never
// reach a dead end and always end in a text the pattern matches; and the token mask.
#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/pattern_walk.h"
#include "iwb/engine/sampling/regex.h"
#include "iwb/engine/sampling/token_constraint.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest/QtTest>

#include <iterator>
#include <optional>
#include <random>
#include <regex>

using namespace iwb;

namespace {

// Pieces random tokens are made of: letters, digits, the patterns' punctuation, JSON's quote
// and backslash, and whole and cut multi-byte characters.
const char* const kTokenPieces[] = {"a",  "b",  "c", "d", "1", "@",    ".",    " ",    "x", "com",
                                    "\"", "\\", "é", "ü", "€", "\xe2", "\x82", "\xc3", "\n"};

bool nfa_matches(const Regex& re, std::string_view text) {
  Regex::States s = re.start();
  for (const char c : text) {
    s = re.step(s, static_cast<unsigned char>(c));
    if (s.empty()) return false;
  }
  return re.is_accepting(s);
}

std::shared_ptr<const JsonGrammar> schema(const char* text) {
  Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_schema(text);
  if (!g) qFatal("%s", g.error_message().c_str());
  return *g;
}

bool feeds(const std::shared_ptr<const JsonGrammar>& g, std::string_view bytes) {
  return JsonMatcher(g).can_feed(bytes);
}

bool feeds_whole(const std::shared_ptr<const JsonGrammar>& g, std::string_view bytes) {
  JsonMatcher m(g);
  return m.feed(bytes) && m.is_complete();
}

}  // namespace

class TestRegex : public QObject {
  Q_OBJECT

 private slots:
  // Both modes against std::regex (ECMAScript: regex_search and regex_match) on random texts over
  // a small alphabet, so that matches are common.
  void matchesWhatStdRegexMatches() {
    // Each pattern, and how std::regex (strict, no Annex B, no named groups) writes the same.
    const std::pair<const char*, const char*> patterns[] = {
        {"abc", nullptr},
        {"^abc$", nullptr},
        {"a|b|c", nullptr},
        {"^(ab|a)c*$", nullptr},
        {"a*b+c?", nullptr},
        {"^[a-c]{2,3}$", nullptr},
        {"^x{2}$", nullptr},
        {"^a{1,}b", nullptr},
        {"[^ab]", nullptr},
        {"^\\d+(\\.\\d+)?$", nullptr},
        {"^\\w\\W\\s\\S$", nullptr},
        {"^(?:a|bc)*$", nullptr},
        {"^.$", nullptr},
        {"^(a(b(c)?)?)+$", nullptr},
        {"^[a-]+$", nullptr},
        {"^[\\d.]+$", nullptr},
        {"^a{0}b$", nullptr},
        {"^(|a)b$", nullptr},
        {"b$", nullptr},
        {"^a", nullptr},
        {"^[A-Z][a-z]*\\s\\d{2,4}$", nullptr},
        {"^\\x61\\u0062$", nullptr},
        {"c{2,}|a", nullptr},
        {"^(?<n>ab)+$", "^(?:ab)+$"},
        {"^\\[\\]\\(\\)$", nullptr},
        {"{", "\\{"},
        {"a{,2}", "a\\{,2\\}"},
        {"^[.]$", nullptr},
        {"^a\\-b$", nullptr},
        {"^$", nullptr},
        {"x{1,3}?", nullptr},
    };
    const std::string alphabet = "abc1 .-A\n[](){}x,2";
    std::mt19937 rng(7);
    for (const auto& [p, written_for_std] : patterns) {
      const char* ref = written_for_std != nullptr ? written_for_std : p;
      Result<std::shared_ptr<const Regex>> search = Regex::compile(p, Regex::Mode::Search);
      Result<std::shared_ptr<const Regex>> full = Regex::compile(p, Regex::Mode::FullMatch);
      QVERIFY2(search.is_ok(), (std::string(p) + ": " + search.error_message()).c_str());
      QVERIFY2(full.is_ok(), (std::string(p) + ": " + full.error_message()).c_str());
      const std::regex reference(ref, std::regex::ECMAScript);
      // fullmatch ignores anchors at the ends: std::regex_match with the pattern's body.
      std::string body = ref;
      if (!body.empty() && body.front() == '^') body.erase(0, 1);
      if (!body.empty() && body.back() == '$') body.pop_back();
      if (body.find('|') != std::string::npos) body = "(?:" + body + ")";
      const std::regex whole(body, std::regex::ECMAScript);
      for (int i = 0; i < 400; ++i) {
        std::string text;
        const int length = static_cast<int>(rng() % 7);
        for (int k = 0; k < length; ++k) text += alphabet[rng() % alphabet.size()];
        const bool expect_search = std::regex_search(text, reference);
        QVERIFY2(nfa_matches(**search, text) == expect_search,
                 (std::string("search ") + p + " on '" + text + "'").c_str());
        const bool expect_full = std::regex_match(text, whole);
        QVERIFY2(nfa_matches(**full, text) == expect_full, (std::string("full ") + p + " on '" + text + "'").c_str());
      }
    }
  }

  void refusesWhatItCannotHoldByName() {
    const std::pair<const char*, const char*> cases[] = {
        {"(a)\\1", "back-references"},
        {"(?=a)", "lookaround"},
        {"(?!a)", "lookaround"},
        {"\\bword", "word boundary"},
        {"\\p{L}", "Unicode properties"},
        {"(ab", "without ')'"},
        {"ab)", "unmatched ')'"},
        {"[ab", "without ']'"},
        {"[z-a]", "out of order"},
        {"*a", "nothing before it"},
        {"a**", "after a quantifier"},
        {"a{3,2}", "m < n"},
        {"a^b", "inside the pattern"},
        {"(a$)", "inside the pattern"},
        {"a{1001}", "above 1000"},
        {"(a{1000}){1000}", "too large"},
        {"\\x4", "two hex digits"},
        {"a\\", "at the end"},
        {"[]", "matches no text"},
        {"a[^\\s\\S]", "matches no text"},
        // What a reply cannot write: a lone surrogate, and in a JSON string a control character
        // that has no short escape.
        {"^\\uD800$", "matches no text"},
        {"^\\x01$", "matches no text"},
    };
    for (const auto& [pattern, message] : cases) {
      Result<std::shared_ptr<const Regex>> r = Regex::compile(pattern, Regex::Mode::Search);
      QVERIFY2(!r.is_ok(), pattern);
      QVERIFY2(r.error_message().find(message) != std::string::npos, (pattern + (" -> " + r.error_message())).c_str());
      QVERIFY(r.error_message().find(std::string("'") + pattern + "'") != std::string::npos);  // named
    }
  }

  void schemaPatternsHoldStrings() {
    const auto phone = schema(R"({"type": "string", "pattern": "^\\d{3}-\\d{4}$"})");
    QVERIFY(feeds_whole(phone, "\"555-1234\""));
    QVERIFY(!feeds(phone, "\"55a"));
    QVERIFY(!feeds(phone, "\"555-12\""));   // closed before the pattern matched
    QVERIFY(!feeds(phone, "\"555-12345"));  // anchored: nothing after
    QVERIFY(!feeds(phone, "\"\\u0035"));    // no \u escapes in a pattern's string
    // Unanchored: the pattern anywhere in the string (JSON Schema's rule).
    const auto has_at = schema(R"({"type": "string", "pattern": "@"})");
    QVERIFY(feeds_whole(has_at, "\"me@example.org\""));
    QVERIFY(!feeds_whole(has_at, "\"example.org\""));
    QVERIFY(feeds(has_at, "\"example.org"));
    // Escapes write the characters they stand for.
    const auto lines = schema("{\"type\": \"string\", \"pattern\": \"^a\\\\nb\\\"$\"}");
    QVERIFY(feeds_whole(lines, "\"a\\nb\\\"\""));
    QVERIFY(!feeds(lines, "\"a\\t"));
    const auto no_escapes = schema(R"({"type": "string", "pattern": "^[a-z]*$"})");
    QVERIFY(!feeds(no_escapes, "\"ab\\"));  // no escape writes a letter
    // Multi-byte characters: refused at the lead byte when no character it begins may come.
    const auto greek = schema(R"({"type": "string", "pattern": "^[α-ω]+$"})");
    QVERIFY(feeds_whole(greek, "\"αβγ\""));
    QVERIFY(!feeds(greek, "\"\xe2"));      // U+2000.. : no Greek letter starts so
    QVERIFY(feeds(greek, "\"\xce"));       // U+0380..U+03BF: some do
    QVERIFY(!feeds(greek, "\"\xce\x91"));  // 'Α' (capital) is outside α-ω
    QVERIFY(!feeds(greek, "\"a"));
    // Beside minLength/maxLength and in properties, with keys unaffected.
    const auto object = schema(
        R"({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$", "maxLength": 3}},
            "required": ["code"]})");
    QVERIFY(feeds_whole(object, "{\"code\": \"ABC\"}"));
    QVERIFY(!feeds(object, "{\"code\": \"ABCD"));
    QVERIFY(!feeds(object, "{\"code\": \"abc"));
    // With maxLength, a character is refused where the pattern could no longer match in the
    // room left ("ok" needs two characters), and a string that can never fit is not opened.
    const auto short_ok = schema(R"({"type": "string", "pattern": "ok", "maxLength": 4})");
    QVERIFY(feeds(short_ok, "\"ab"));
    QVERIFY(!feeds(short_ok, "\"abc"));
    QVERIFY(feeds_whole(short_ok, "\"abok\""));
    QVERIFY(feeds_whole(short_ok, "\"aok\""));
    QVERIFY(!feeds(schema(R"({"type": "string", "pattern": "^abc$", "maxLength": 2})"), "\""));
    JsonMatcher walker(schema(R"({"type": "string", "pattern": "o[k€]", "maxLength": 6})"));
    std::mt19937 rng(3);
    std::string written;
    while (!walker.next_bytes().none()) {
      std::vector<int> options;
      for (int b = 0; b < 256; ++b) {
        if (walker.next_bytes()[static_cast<size_t>(b)]) options.push_back(b);
      }
      const char b = static_cast<char>(options[rng() % options.size()]);
      QVERIFY(walker.feed(std::string_view(&b, 1)));
      written += b;
    }
    QVERIFY(walker.is_complete());  // every walk ends: no dead end at the length limit
    QVERIFY2(written.find("ok") != std::string::npos || written.find("o€") != std::string::npos, written.c_str());
    // No type, but a pattern: a string is meant.
    QVERIFY(feeds_whole(schema(R"({"pattern": "^x$"})"), "\"x\""));
  }

  // Whatever bytes the matcher allows, in any order, lead to a text the pattern matches: there
  // is always a next byte or the value is whole (no dead ends, multi-byte characters included).
  void randomWalksNeverReachADeadEnd() {
    const char* const patterns[] = {"^[a-c]{2}\\d?$", "^(é|ü|€)+x$", "^[^\\x00-\\x7f]{1,2}$",
                                    "^[ab]{1,4}@[cd]{1,3}\\.(com|org)$", "^\\s?\\S\\S$"};
    std::mt19937 rng(11);
    int num_fast_checks = 0;
    for (const char* p : patterns) {
      const std::string schema_text = "{\"type\": \"string\", \"pattern\": " + nlohmann_string(p) + "}";
      const auto g = schema(schema_text.c_str());
      const auto text_grammar = JsonGrammar::from_regex(p);
      QVERIFY(text_grammar.is_ok());
      for (const bool is_text : {false, true}) {
        int num_whole = 0;
        for (int walk = 0; walk < 60; ++walk) {
          JsonMatcher m(is_text ? *text_grammar : g);
          std::string bytes;
          for (int step = 0; step < 40; ++step) {
            const std::bitset<256> next = m.next_bytes();
            if (next.none()) break;
            if (m.is_complete() && rng() % 3 == 0) break;
            std::vector<int> options;
            for (int b = 0; b < 256; ++b) {
              if (next[static_cast<size_t>(b)]) options.push_back(b);
            }
            // The token mask's fast path (the pattern alone, its DFA shared by the tokens
            // checked from one place, as the mask walks a vocabulary) agrees with feeding the
            // matcher.
            std::optional<PatternWalk> walk;
            if (std::optional<JsonMatcher::PatternPlace> place = m.pattern_place()) walk.emplace(*place);
            for (int t = 0; t < 8; ++t) {
              std::string token;
              const int length = 1 + static_cast<int>(rng() % 4);
              for (int k = 0; k < length; ++k) token += kTokenPieces[rng() % std::size(kTokenPieces)];
              const std::optional<bool> fast = m.pattern_takes(token);
              QCOMPARE(walk ? walk->takes(token) : std::nullopt, fast);
              if (fast) {
                QVERIFY2(*fast == m.can_feed(token),
                         (std::string(p) + " after '" + bytes + "': '" + token + "'").c_str());
                ++num_fast_checks;
              }
            }
            const char b = static_cast<char>(options[rng() % options.size()]);
            QVERIFY(m.feed(std::string_view(&b, 1)));
            bytes += b;
          }
          if (!m.is_complete()) continue;  // stopped by the step limit
          ++num_whole;
          if (!is_text) {
            // The string's text, its escapes decoded.
            const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString("[" + bytes + "]"));
            QVERIFY2(doc.isArray() && doc.array().at(0).isString(), bytes.c_str());
            bytes = doc.array().at(0).toString().toStdString();
          }
          const auto re = Regex::compile(p, is_text ? Regex::Mode::FullMatch : Regex::Mode::Search);
          QVERIFY2(
              utf8_matches(**re, bytes),
              (std::string(p) + " walked to '" + QByteArray::fromStdString(bytes).toHex().toStdString() + "'").c_str());
        }
        QVERIFY2(num_whole >= 5, p);  // some walks end; the rest stop at the step limit
      }
    }
    QVERIFY(num_fast_checks > 1000);
  }

  // vLLM's guided_regex: the reply's raw text matches the whole pattern, and ends where
  // nothing more may follow.
  void guidedRegexHoldsTheWholeReply() {
    Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_regex("(yes|no), because .{1,5}");
    QVERIFY(g.is_ok());
    QVERIFY(feeds_whole(*g, "yes, because it is"));
    QVERIFY(!feeds(*g, "maybe"));
    QVERIFY(!feeds(*g, "\"yes"));  // not JSON
    JsonMatcher m(*g);
    QVERIFY(m.feed("no, because abcde"));
    QVERIFY(m.is_complete());
    QVERIFY(m.next_bytes().none());                            // five characters: the reply must end
    QVERIFY(feeds_whole(*JsonGrammar::from_regex("a*"), ""));  // the empty reply matches
    QVERIFY(!JsonMatcher(*JsonGrammar::from_regex("a+")).is_complete());
    QVERIFY(!JsonGrammar::from_regex("(?=x)").is_ok());
    QVERIFY(feeds_whole(*JsonGrammar::from_regex("\\x01"), "\x01"));  // raw text may hold it
    // A branch that can never match is not entered: after "a" only "b" may come.
    JsonMatcher dead_branch(*JsonGrammar::from_regex("a[]|ab"));
    QVERIFY(dead_branch.feed("a"));
    QCOMPARE(dead_branch.next_bytes().count(), size_t{1});
    QVERIFY(dead_branch.next_bytes().test('b'));
  }

  // The token mask with a pattern: tokens that would break it, or leave a character that cannot
  // fit, are masked; whole ones that fit are kept.
  void tokenMaskFollowsThePattern() {
    const auto g = schema(R"({"type": "string", "pattern": "^[0-9]{2}-[0-9]{2}$"})");
    TokenBytes tokens({"\"", "12", "1", "-", "12-", "ab", "\"x", "3\"", "\xc3", "", "12-34\""},
                      {false, false, false, false, false, false, false, false, false, true, false});
    JsonMatcher m(g);
    QVERIFY(m.feed("\""));
    std::vector<float> logits(tokens.size(), 0.0f);
    const size_t allowed = mask_disallowed_tokens(m, tokens, logits);
    // "12", "1", "12-" and the whole "12-34\"" fit; "3\"" closes too early, "\xc3" starts no digit.
    const std::vector<bool> expect = {false, true, true, false, true, false, false, false, false, false, true};
    for (size_t i = 0; i < tokens.size(); ++i) {
      QVERIFY2(std::isinf(logits[i]) != expect[i], ("token " + std::to_string(i)).c_str());
    }
    QCOMPARE(allowed, size_t{4});
  }

 private:
  static std::string nlohmann_string(const char* p) {
    std::string out = "\"";
    for (const char* c = p; *c; ++c) {
      if (*c == '\\' || *c == '"') out += '\\';
      out += *c;
    }
    return out + "\"";
  }

  static bool utf8_matches(const Regex& re, const std::string& text) {
    Regex::States s = re.start();
    const QString q = QString::fromUtf8(text);
    for (const char32_t c : q.toUcs4()) {
      s = re.step(s, c);
      if (s.empty()) return false;
    }
    return re.is_accepting(s);
  }
};

QTEST_GUILESS_MAIN(TestRegex)
#include "test_regex.moc"
