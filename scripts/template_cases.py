"""Conversations that exercise chat templates' tool formats, shared by
scripts/templates-vs-llama.py and scripts/templates-vs-jinja.py: tools with and without a system
message, calls and tool results over two turns, a call after text (with and without a system
message), no tools, a call id that is not 9 characters and two user turns in a row (Mistral's
templates refuse both), a tool with a richer schema (gpt-oss writes it as TypeScript), a past call of it with every
kind of JSON value, a call sent back with its reasoning_content, and past reasoning in think blocks
before and after the last user message, and two answers sent back with their reasoning_content
(Kimi K2 Thinking's template writes it after its first answer without calls only).
Tool-call arguments are JSON text, as OpenAI clients send them."""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city, °C",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                   "required": ["city"]}}}
NOW = {"type": "function", "function": {"name": "now", "description": "The time",
                                        "parameters": {"type": "object", "properties": {}}}}


# A tool whose parameters use what gpt-oss's template writes as TypeScript in its own ways:
# descriptions, defaults, enums, nested objects, arrays of several kinds, oneOf, type lists, nullable.
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the catalogue",
    "parameters": {"type": "object", "required": ["query"], "properties": {
        "query": {"type": "string", "description": "Words to look for"},
        "limit": {"type": "integer", "default": 10},
        "sort": {"type": "string", "enum": ["new", "old"], "default": "new"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ranges": {"type": "array", "items": {"type": "object", "properties": {"lo": {"type": "number"}}}},
        "anything": {"type": "array"},
        "filter": {"type": "object", "required": ["field"],
                   "properties": {"field": {"type": "string"}, "exact": {"type": "boolean", "nullable": True}}},
        "when": {"oneOf": [{"type": "string", "description": "a date"}, {"type": "integer", "default": 0}]},
        "mode": {"type": ["string", "null"]},
        "note": {"type": "string", "nullable": True, "default": None}}}}}


def _call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CASES = [
    {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": [WEATHER, NOW]},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "tools": [NOW]},
    {"messages": [{"role": "user", "content": "Weather in Paris and the time?"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [_call("call00001", "get_weather", '{"city":"Paris","unit":"c"}'),
                                  _call("call00002", "now", "{}")]},
                  {"role": "tool", "tool_call_id": "call00001", "content": '{"temp": 21}'},
                  {"role": "tool", "tool_call_id": "call00002", "content": "12:00"},
                  {"role": "assistant", "content": "21 °C at noon."},
                  {"role": "user", "content": "Thanks"}],
     "tools": [WEATHER, NOW]},
    {"messages": [{"role": "user", "content": "Hi"}]},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Let me look.", "tool_calls": [_call("call00003", "now", "{}")]},
                  {"role": "tool", "tool_call_id": "call00003", "content": "noon"}]},
    {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Let me look.", "tool_calls": [_call("call00003", "now", "{}")]},
                  {"role": "tool", "tool_call_id": "call00003", "content": "noon"}]},
    # What Mistral's templates refuse: an id that is not 9 characters, two user turns in a row.
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": None, "tool_calls": [_call("call_1", "now", "{}")]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "noon"}],
     "tools": [NOW]},
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "Hello?"}], "tools": [NOW]},
    {"messages": [{"role": "user", "content": "Find red shoes"}], "tools": [SEARCH]},
    # A past call whose arguments hold every kind of JSON value (Qwen3-Coder writes each as text:
    # Python's str() of numbers, True and None), after text with white space around it, from a
    # strict tool.
    {"messages": [{"role": "user", "content": "Find red shoes"},
                  {"role": "assistant", "content": "  Searching.\n",
                   "tool_calls": [_call("call00004", "search",
                                        '{"query": "red \\"shoes\\"", "limit": 10, "ranges": [{"lo": 0.5}, '
                                        '{"lo": 1e20}], "filter": {"field": "colour", "exact": true}, '
                                        '"when": 20261206, "mode": null, "note": "It\'s\\nfine", "anything": '
                                        '[2.0, 1e-7, false]}')]},
                  {"role": "tool", "tool_call_id": "call00004", "content": "[]"},
                  {"role": "assistant", "content": "None found."}],
     "tools": [dict(SEARCH, function=dict(SEARCH["function"], strict=True))]},
    # An agent's turn sent back with its reasoning (vLLM's and llama-server's reasoning_content),
    # which Qwen3's template writes as the turn's think block.
    {"messages": [{"role": "user", "content": "What time is it?"},
                  {"role": "assistant", "content": None, "reasoning_content": "Use the clock.",
                   "tool_calls": [_call("call00005", "now", "{}")]},
                  {"role": "tool", "tool_call_id": "call00005", "content": "noon"}],
     "tools": [NOW]},
    # Past reasoning in the content's think blocks, before the last user message and after it
    # (GLM's and Qwen3's templates keep only the latter), results of two calls in a row.
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "<think>\nGreet.\n</think>\n\nHello!"},
                  {"role": "user", "content": "Weather in Oslo and the time?"},
                  {"role": "assistant", "content": "<think>Two tools.</think>On it.",
                   "tool_calls": [_call("call00006", "get_weather", '{"city": "Oslo"}'),
                                  _call("call00007", "now", "{}")]},
                  {"role": "tool", "tool_call_id": "call00006", "content": "-3"},
                  {"role": "tool", "tool_call_id": "call00007", "content": "dusk"}],
     "tools": [WEATHER, NOW]},
    # Two answers sent back with their reasoning (reasoning_content, and a think block in the
    # second's text), a system message, no tools.
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet."},
                  {"role": "user", "content": "And now?"},
                  {"role": "assistant", "content": "<think>Still.</think>Now.", "reasoning_content": "Answer."},
                  {"role": "user", "content": "Ok"}]},
]

# Gemma 4's own (scripts/templates-vs-jinja.py adds them for its template): tools whose schemas
# take its other branches (arrays of objects with required names, nested objects, keys sorted
# without case), past calls with nested arguments and a result that is a JSON object, an answer
# after results that ends the conversation, past reasoning in a turn's thought channel, and a
# system message after the first turn.
LIST = {"type": "function", "function": {
    "name": "add_items", "description": "Add items to a list",
    "parameters": {"type": "object", "required": ["items", "List"], "properties": {
        "List": {"type": "string", "description": "Which list", "enum": ["todo", "done"]},
        "items": {"type": "array", "description": "What to add",
                  "items": {"type": "object", "required": ["text"], "nullable": None,
                            "properties": {"text": {"type": "string"}, "due": {"type": "integer"}}}},
        "options": {"type": "object", "properties": {"notify": {"type": "boolean", "description": "Tell me"},
                                                     "tags": {"type": "array", "items": {"type": ["string"]}}}}}}}}
BARE = {"type": "function", "function": {"name": "ping", "description": "Ping"}}

GEMMA4_CASES = [
    {"messages": [{"role": "system", "content": "  Be brief.  "}, {"role": "user", "content": " Add milk "}],
     "tools": [LIST, BARE]},
    {"messages": [{"role": "user", "content": "Add milk and eggs to my todo list"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [_call("call00008", "add_items",
                                        '{"List": "todo", "items": [{"text": "milk", "due": 3}, {"text": "say \\"hi\\"\\n"}], '
                                        '"options": {"notify": false, "tags": [], "x": null, "ratio": 0.25, "big": 1e16}, '
                                        '"a": 1}')]},
                  {"role": "tool", "tool_call_id": "call00008",
                   "content": '{"ok": true, "count": 2, "names": ["milk", "eggs"], "nested": {"B": 1, "a": 2.0}}'},
                  {"role": "assistant", "content": "Added both."}],
     "tools": [LIST]},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "<|channel>thought\nGreet them.<channel|>Hello!"},
                  {"role": "system", "content": "Answer in French."},
                  {"role": "user", "content": "How are you?"}]},
    {"messages": [{"role": "user", "content": "Ping twice"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [_call("call00009", "ping", "{}"), _call("call00010", "ping", "{}")]},
                  {"role": "tool", "tool_call_id": "call00009", "content": "pong"},
                  {"role": "tool", "tool_call_id": "call00010", "content": "-1.5"},
                  {"role": "assistant", "content": "Both answered."},
                  {"role": "user", "content": "Again?"},
                  {"role": "assistant", "content": None, "tool_calls": [_call("call00011", "ping", "{}")]}],
     "tools": [BARE]},
]

# Qwen3.5's own (scripts/templates-vs-jinja.py adds them for its template): contents trimmed (of
# Unicode's spaces too; a system text of spaces with tools), a client's <tool_response> block as a
# user message (no query), an agent's turns after the last query (reasoning_content with line
# breaks, a think block whose text keeps its leading spaces, several <think> tags), a result first
# in the conversation, and what it refuses: no user query, a system message after the first,
# arguments that are no object.
QWEN35_CASES = [
    {"messages": [{"role": "system", "content": "\u3000Be brief.  "},
                  {"role": "user", "content": "\u00a0\x1c Weather in S\u00e3o Paulo?\u2028\n"}],
     "tools": [WEATHER]},
    {"messages": [{"role": "system", "content": "  "}, {"role": "user", "content": "Hi"}], "tools": [NOW]},
    {"messages": [{"role": "user", "content": "Time?"},
                  {"role": "assistant", "content": None, "tool_calls": [_call("call00012", "now", "{}")]},
                  {"role": "user", "content": "<tool_response>\nnoon\n</tool_response>"},
                  {"role": "assistant", "content": "Noon."}]},
    {"messages": [{"role": "user", "content": "Weather in Oslo?"},
                  {"role": "assistant", "content": "", "reasoning_content": "\nUse the tool.\n",
                   "tool_calls": [_call("call00013", "get_weather", '{"city": "Oslo", "unit": "c"}')]},
                  {"role": "tool", "tool_call_id": "call00013", "content": "  -3\n"},
                  {"role": "assistant", "content": "<think>\nCold.\n</think>\n\n  It is -3 °C.",
                   "tool_calls": [_call("call00014", "now", "{}")]},
                  {"role": "tool", "tool_call_id": "call00014", "content": "dusk"}],
     "tools": [WEATHER, NOW]},
    {"messages": [{"role": "user", "content": "Q"},
                  {"role": "assistant", "content": "a<think>\nb<think>c\n</think>d</think>\n\ne"},
                  {"role": "user", "content": "Again"}, {"role": "assistant", "content": "x</think>y"}]},
    {"messages": [{"role": "tool", "tool_call_id": "call00015", "content": "r"}, {"role": "user", "content": "Hi"}]},
    {"messages": [{"role": "system", "content": "S"}, {"role": "assistant", "content": "Hi"}]},
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "system", "content": "S"}]},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": None, "tool_calls": [_call("call00016", "now", "[1]")]},
                  {"role": "tool", "tool_call_id": "call00016", "content": "noon"}],
     "tools": [NOW]},
]

# Conversations without tools, for templates of families that have no tool format here
# (scripts/templates-vs-jinja.py --plain): a system message and one turn, several turns without
# a system message, and several with one.
PLAIN_CASES = [
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]},
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                  {"role": "user", "content": "Who are you?"}]},
    {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Who are you?"}]},
]
