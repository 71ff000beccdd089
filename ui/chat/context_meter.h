// The context meter under the chat input: how many tokens the conversation (with the text being
// typed, rendered by the model's chat template) takes of the model's context, and whether a
// reply still fits ("1,840 / 4,096 tokens").
#pragma once

#include <QWidget>

class QLabel;
class QProgressBar;

namespace iwb::ui {

class ContextMeter : public QWidget {
  Q_OBJECT

 public:
  enum class State { Unknown, Fits, Tight, Overflows };
  // Below this many free tokens a prompt is not worth sending: the reply would stop at once.
  static constexpr int kMinReplyTokens = 32;

  explicit ContextMeter(QWidget* parent = nullptr);

  // `numReplyTokens`: the sampling settings' maximum reply; `numTurnsLeftOut`: oldest turns the
  // prompt leaves out to fit (the user chose to shorten the conversation).
  void setUsage(int numTokens, int contextLength, int numReplyTokens, int numTurnsLeftOut = 0);
  void clear();  // no model, or nothing to count

  static State stateFor(int numTokens, int contextLength, int numReplyTokens);
  State state() const { return m_state; }
  int numTokens() const { return m_numTokens; }
  int contextLength() const { return m_contextLength; }
  QString text() const;

 private:
  QProgressBar* m_bar;
  QLabel* m_label;
  State m_state = State::Unknown;
  int m_numTokens = -1;
  int m_contextLength = 0;
};

// The reply tokens a shortened conversation leaves room for (GenerationInput::fitReserveTokens).
int fitReserveTokens(int maxReplyTokens, int contextLength);

}  // namespace iwb::ui
