// The streaming check of the tool-call formats' tests (test_glm_tools, test_section_tools,
// test_qwen_xml_tools, test_gemma4_chat): split_tool_calls over every prefix of a reply.
#pragma once

#include "iwb/engine/chat/tool_calls.h"

#include <QtTest>

#include <initializer_list>
#include <string>
#include <string_view>

namespace iwb::test {

struct StreamedCallsCheck {
  const ToolArgumentTypes* types = nullptr;
  std::initializer_list<std::string_view> leaked = {};  // markers no prefix's text may hold
  bool compares_ids = false;                            // each call's id whole from its first sight
  int growing_more_than = -1;  // cuts with a call's arguments seen unfinished must exceed this (-1: no check)
};

// Every byte of a streamed reply: its text and each call's arguments are the start of the whole
// reply's (a string's text growing, other values once whole), names whole from the first time a
// call is seen.
inline void expect_streamed_calls_grow(const std::string& reply, ToolCallFormat format,
                                       const StreamedCallsCheck& check = {}) {
  const ToolReply whole = split_tool_calls(reply, false, format, check.types);
  QVERIFY(!whole.calls.empty());
  int num_growing = 0;
  for (size_t cut = 0; cut <= reply.size(); ++cut) {
    const ToolReply part = split_tool_calls(reply.substr(0, cut), true, format, check.types);
    const QString where = QString::fromStdString(reply.substr(0, cut));
    QVERIFY2(whole.content.starts_with(part.content), qPrintable(where));
    QVERIFY2(part.calls.size() <= whole.calls.size(), qPrintable(where));
    for (size_t i = 0; i < part.calls.size(); ++i) {
      QCOMPARE(part.calls[i].name, whole.calls[i].name);
      if (check.compares_ids) QCOMPARE(part.calls[i].id, whole.calls[i].id);
      QVERIFY2(whole.calls[i].arguments.starts_with(part.calls[i].arguments), qPrintable(where));
      num_growing += part.calls[i].arguments != whole.calls[i].arguments;
    }
    for (const std::string_view marker : check.leaked) {
      QVERIFY2(part.content.find(marker) == std::string::npos, qPrintable(where));  // no marker leaks
    }
  }
  if (check.growing_more_than >= 0) QVERIFY(num_growing > check.growing_more_than);
}

}  // namespace iwb::test
