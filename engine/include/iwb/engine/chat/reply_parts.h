// A reply split into what the model reasoned and what it answered, for the chat view, the
// next turn's prompt and the server's `reasoning_content`. Two conventions are recognised, each
// only at the very start of the reply (leading white space aside):
// harmony channels (gpt-oss: `<|channel|>analysis<|message|>…<|end|>` then
// `<|start|>assistant<|channel|>final<|message|>…<|return|>`, which needs the control tokens
// rendered: see ChatPrompt::renders_special_tokens) and a reply that opens with `<think>`
// (Qwen3, QwQ, DeepSeek-R1 distills); and Gemma 4's `<|channel>thought\n…<channel|>` blocks,
// read anywhere in the reply (their markers are tokens of their own). Works on a reply cut
// anywhere: an unclosed part runs to the end.
#pragma once

#include <string>
#include <string_view>

namespace iwb {

struct ReplyParts {
  std::string reasoning;      // harmony's analysis channel, the text inside <think>…</think>, Gemma 4's thoughts
  std::string content;        // the answer: harmony's final (and commentary) channels, or the rest
  bool is_reasoning = false;  // the text ends inside the reasoning (still thinking)
};

// is_streaming: more text may follow, so a trailing start of a marker ("<|chan", "</thi") is
// held back; a finished reply keeps every character.
ReplyParts split_reply(std::string_view raw, bool is_streaming = false);

}  // namespace iwb
