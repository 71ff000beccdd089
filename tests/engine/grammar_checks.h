// Checks the structured-output grammar tests share (test_json_grammar, test_qwen_xml_tools,
// test_glm_tools): a
// text a grammar takes whole, a text it refuses at a given byte, and the token mask agreeing
// with feeding each token.
#pragma once

#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/token_constraint.h"

#include <QtTest>

#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::test {

// Feeds `text` one byte at a time; returns how many bytes were taken before one was refused.
inline size_t bytes_taken(const std::shared_ptr<const JsonGrammar>& g, std::string_view text,
                          bool* complete = nullptr) {
  JsonMatcher m(g);
  size_t i = 0;
  for (; i < text.size(); ++i) {
    if (!m.feed(text.substr(i, 1))) break;
  }
  if (complete != nullptr) *complete = m.is_complete();
  return i;
}

inline QString printable(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<int>(text.size()));
}

inline void expect_fits(const std::shared_ptr<const JsonGrammar>& g, std::string_view text) {
  bool complete = false;
  const size_t taken = bytes_taken(g, text, &complete);
  QVERIFY2(taken == text.size(), qPrintable(QString("refused at byte %1 of %2").arg(taken).arg(printable(text))));
  QVERIFY2(complete, qPrintable(printable(text)));
  // In one piece too, as a multi-byte token is fed.
  JsonMatcher whole(g);
  QVERIFY(whole.feed(text));
  QVERIFY(whole.is_complete());
}

// The text is refused exactly at `bad` (the byte after the longest acceptable prefix).
inline void expect_refused_at(const std::shared_ptr<const JsonGrammar>& g, std::string_view text, char bad) {
  const size_t taken = bytes_taken(g, text);
  QVERIFY2(taken < text.size(), qPrintable(printable(text)));
  QCOMPARE(text[taken], bad);
  JsonMatcher m(g);
  QVERIFY(!m.feed(text));  // refused whole, and left as it was
  QVERIFY(m.feed(text.substr(0, taken)));
}

// A vocabulary of `count` random pieces, each 1 to `max_atoms` of `atoms` joined.
inline std::vector<std::string> random_pieces(std::mt19937& rng, const std::vector<std::string>& atoms, int count,
                                              int max_atoms) {
  std::vector<std::string> pieces;
  for (int i = 0; i < count; ++i) {
    std::string piece;
    const int n = 1 + static_cast<int>(rng() % static_cast<unsigned>(max_atoms));
    for (int k = 0; k < n; ++k) piece += atoms[rng() % atoms.size()];
    pieces.push_back(piece);
  }
  return pieces;
}

// The mask of every token at the matcher's place is what feeding each token says; `where` (the
// reply so far) names the place in a failure.
inline void expect_mask_agrees(const JsonMatcher& m, const TokenBytes& tokens, std::string_view where) {
  std::vector<float> logits(tokens.size(), 0.0f);
  const size_t num_allowed = mask_disallowed_tokens(m, tokens, logits);
  size_t expected = 0;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const bool allowed = is_token_allowed(m, tokens, static_cast<int32_t>(id));
    expected += allowed;
    if (allowed != std::isfinite(logits[id])) {
      QFAIL(qPrintable(QString("token '%1' after '%2': mask %3, feeding %4")
                           .arg(QString::fromStdString(tokens.bytes(static_cast<int32_t>(id))), printable(where))
                           .arg(std::isfinite(logits[id]))
                           .arg(allowed)));
    }
  }
  QCOMPARE(num_allowed, expected);
}

// A test vocabulary: `pieces` as plain tokens, then an end-of-generation token, then `controls`
// as control tokens.
inline TokenBytes tag_test_vocabulary(std::vector<std::string> pieces, const std::vector<std::string>& controls = {}) {
  std::vector<bool> ends(pieces.size(), false), is_control(pieces.size(), false);
  pieces.push_back("");
  ends.push_back(true);
  is_control.push_back(false);
  for (const std::string& c : controls) {
    pieces.push_back(c);
    ends.push_back(false);
    is_control.push_back(true);
  }
  return TokenBytes(pieces, ends, is_control);
}

// The mask agrees with feeding at every cut of `text` (which the grammar takes); returns how many
// of those places were inside raw text (the mask's raw-text shortcut).
inline int expect_mask_agrees_at_every_cut(const std::shared_ptr<const JsonGrammar>& g, const TokenBytes& tokens,
                                           const std::string& text) {
  int num_raw = 0;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    JsonMatcher m(g);
    if (!m.feed(text.substr(0, cut))) {
      QTest::qFail(qPrintable("refused: " + printable(text.substr(0, cut))), __FILE__, __LINE__);
      return num_raw;
    }
    num_raw += m.raw_text().has_value();
    expect_mask_agrees(m, tokens, text.substr(0, cut));
    if (QTest::currentTestFailed()) return num_raw;
  }
  return num_raw;
}

}  // namespace iwb::test
