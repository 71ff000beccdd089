// StopStringMatcher: stop strings split across pushes are found, text that may begin one is
// held back (and released when it turns out not to), and the stop string is never emitted.
#include "iwb/engine/runtime/stop_strings.h"

#include <QTest>

using iwb::StopStringMatcher;

class TestStopStrings : public QObject {
  Q_OBJECT

 private slots:
  void holdsBackAPossibleStart() {
    StopStringMatcher m({"world"});
    auto a = m.push("Hel");
    QCOMPARE(a.text, std::string("Hel"));
    auto b = m.push("lo wor");
    QCOMPARE(b.text, std::string("lo "));  // "wor" could be the start of "world"
    QVERIFY(!b.is_stopped);
    QCOMPARE(m.num_held_bytes(), size_t(3));
    auto c = m.push("ld!");
    QVERIFY(c.is_stopped);
    QCOMPARE(c.text, std::string());
    QCOMPARE(m.push("more").text, std::string());  // stays stopped
  }

  void releasesWhatTurnsOutNotToStop() {
    StopStringMatcher m({"world"});
    QCOMPARE(m.push("a wo").text, std::string("a "));
    QCOMPARE(m.push("rm").text, std::string("worm"));
    QCOMPARE(m.push(" w").text, std::string(" "));
    QCOMPARE(m.flush(), std::string("w"));
    QCOMPARE(m.flush(), std::string());
  }

  void earliestOfSeveralStops() {
    StopStringMatcher m({"</s>", "\nUser:", ""});  // the empty string is ignored
    auto a = m.push("Answer.\nUs");
    QCOMPARE(a.text, std::string("Answer."));
    auto b = m.push("er: hi </s>");
    QVERIFY(b.is_stopped);
    QCOMPARE(b.text, std::string());
  }

  void stopInsideOnePush() {
    StopStringMatcher m({"<end_of_turn>"});
    auto a = m.push("Fine.<end_of_turn>\nmore");
    QVERIFY(a.is_stopped);
    QCOMPARE(a.text, std::string("Fine."));
  }

  void multiByteTextIsNeverSplit() {
    StopStringMatcher m({"\xC3\xA9t\xC3\xA9"});  // "été"
    auto a = m.push("caf\xC3\xA9");             // "café": "é" may start "été"
    QCOMPARE(a.text, std::string("caf"));
    auto b = m.push("!");
    QCOMPARE(b.text, std::string("\xC3\xA9!"));
  }

  void noStopsPassesEverything() {
    StopStringMatcher m({});
    QCOMPARE(m.push("anything").text, std::string("anything"));
    QCOMPARE(m.flush(), std::string());
  }
};

QTEST_APPLESS_MAIN(TestStopStrings)
#include "test_stop_strings.moc"
