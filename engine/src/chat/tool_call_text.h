// Text helpers the tool-call readers share (tool_calls.cpp, xml_tool_calls.cpp, glm_tool_calls.cpp,
// section_tool_calls.cpp): the text before
// a calls' marker, a marker cut by the stream, white space around calls.
#pragma once

#include "iwb/engine/chat/tool_calls.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::detail {

inline constexpr std::string_view kWhitespace = " \t\r\n";

// The text without JSON's white space around it.
std::string_view trim(std::string_view s);

// How many bytes at the end of `text` begin `marker` (a marker cut by the stream).
size_t partial_marker(std::string_view text, std::string_view marker);

// Appends the reply's text from `pos` up to the next `marker` (the calls' opening) and returns
// where the marker is; with none, the rest, and npos. While streaming, a trailing start of the
// marker is held back.
size_t append_text_before(std::string_view reply, size_t pos, std::string_view marker, bool is_streaming,
                          std::string* text);

// White space around calls is not an answer; while streaming it waits until text follows it.
void trim_trailing_space(ToolReply* out, bool is_streaming);

// Qwen3-Coder's calls (split_tool_calls with ToolCallFormat::QwenXml).
ToolReply split_xml_calls(std::string_view reply, bool is_streaming, const ToolArgumentTypes* types);
// GLM's calls (GlmXml; `is_compact`: Glm47Xml), in glm_tool_calls.cpp.
ToolReply split_glm_calls(std::string_view reply, bool is_streaming, const ToolArgumentTypes* types, bool is_compact);

// The JSON object or list that opens at text[at], as far as it is written, without the white
// space outside strings (each byte final once read: a streamed value only grows); returns where
// it ends (npos while it does not). In tool_calls.cpp.
size_t read_compact_json(std::string_view text, size_t at, std::string* out);

// DeepSeek V3.1's and Kimi K2's calls (DeepSeekV31, KimiK2), in section_tool_calls.cpp.
ToolReply split_section_calls(std::string_view reply, bool is_streaming, ToolCallFormat format);
// One call of a tool as the section formats write it (the grammar's pieces: its marker and name,
// Kimi's index, the arguments marker, `arguments`, the call's end).
std::vector<JsonGrammar::Piece> section_call_pieces(ToolCallFormat format, const std::string& name,
                                                    std::shared_ptr<const JsonGrammar> arguments);
// The section after its opening marker (the trigger): one of `calls`, then the section's end or
// another call (`allows_several`: up to kMaxSectionCalls).
inline constexpr int kMaxSectionCalls = 8;
std::shared_ptr<const JsonGrammar> section_calls_grammar(ToolCallFormat format,
                                                         const std::vector<std::vector<JsonGrammar::Piece>>& calls,
                                                         bool allows_several);

// Gemma 4's calls (Gemma4), in gemma4_tool_calls.cpp: the reader, the grammar of a call's
// arguments (Gemma 4's syntax, objects and lists nested three deep; not each tool's schema, as
// llama.cpp's neither), and one call of a tool as the grammar's pieces (call:NAME, the arguments,
// <tool_call|>).
ToolReply split_gemma4_calls(std::string_view reply, bool is_streaming);
Result<std::shared_ptr<const JsonGrammar>> gemma4_arguments_grammar();
std::vector<JsonGrammar::Piece> gemma4_call_pieces(const std::string& name,
                                                   std::shared_ptr<const JsonGrammar> arguments);

// Formats whose values are text (xml_tool_calls.cpp): a whole parameter's text as the JSON it
// is in the arguments, read as `kind` says.
std::string argument_json(std::string_view text, ArgumentText kind);
// Whether `text` begins with `marker`, or is a beginning of it (the marker still being written).
bool starts_with_part_of(std::string_view text, std::string_view marker);

// One <tool_call> block as a tag format's reader read it (xml_tool_calls.cpp, glm_tool_calls.cpp):
// its call (none when the block is no call, or may yet become one: is_undecided) and where the
// block ends (npos while it does not).
struct CallBlock {
  std::optional<ParsedToolCall> call;
  bool is_undecided = false;
  size_t end = std::string_view::npos;
};
// Takes the block opened at `open` (its body at `body`) into `out`: its call, or its text when it
// is no call. Returns where the reply goes on, or npos where reading stops (a call still being
// written or cut off, a block not yet telling, an unclosed block).
size_t take_call_block(std::string_view reply, size_t open, size_t body, CallBlock read, bool is_streaming,
                       ToolReply* out);

}  // namespace iwb::detail
