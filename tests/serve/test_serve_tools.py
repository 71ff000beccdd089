"""Tool calling over the API, driven by the official openai client against a real `iwb serve`
(aidreams with --chat-template chatml, so the Qwen2.5 / Qwen3 tool format; and with a Llama
3.1-style template, Llama 3's format, Mistral Small 3.2's, Nemo's, Granite's, gpt-oss's,
Qwen3-Coder's, Qwen3.5's, GLM-4.5/4.6's and 4.7's, DeepSeek V3.1's and Kimi K2's): tool_choice
"required" and a named function give calls whose arguments fit the tool's schema, in the
response and streamed (the client's own stream accumulation), parallel_tool_calls false gives one,
the client's pydantic_function_tool with `parse` reads the arguments back into the model; a
conversation with calls and tool results renders as the template writes it (/apply-template);
tool_choice "none" hides the tools; and OpenAI-shaped 400s for what cannot be honoured."""

import json
import os
import subprocess
import tempfile
import time
import unittest

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=True)

import openai  # noqa: E402  (from the virtual environment)
import pydantic  # noqa: E402  (installed with openai)

MODEL = None
SERVER = None
CLIENT = None
NO_WHITESPACE = {}  # serve_fixture.whitespace_token_ids: the story model would pad the JSON

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time now",
                                         "parameters": {"type": "object", "properties": {}}}}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
# A call and its result sent back, as a client continues the conversation.
SENT_BACK = MESSAGES + [{"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function",
     "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]


class Order(pydantic.BaseModel):
    item: str = pydantic.Field(max_length=10)
    count: int = pydantic.Field(ge=1, le=5)


def chat(**kwargs):
    args = dict(model="aidreams", messages=MESSAGES, max_tokens=100, temperature=0, logit_bias=NO_WHITESPACE,
                tools=[WEATHER, TIME])
    args.update(kwargs)
    return CLIENT.chat.completions.create(**args)


def final_choice(client, stream, args):
    """The response's first choice, whole or (stream) as the client's stream helper assembles it."""
    if not stream:
        return client.chat.completions.create(**args).choices[0]
    with client.chat.completions.stream(**args) as s:
        return s.get_final_completion().choices[0]


def check_weather_call(test, call):
    test.assertEqual(call.type, "function")
    # A new id, or Kimi K2's own functions.NAME:N (the model writes its calls' ids).
    test.assertTrue(call.id.startswith("call_") or call.id.startswith("functions.get_weather:"), call.id)
    test.assertEqual(call.function.name, "get_weather")
    args = json.loads(call.function.arguments)
    test.assertEqual(set(args), {"city", "unit"}, call.function.arguments)
    test.assertIsInstance(args["city"], str)
    test.assertLessEqual(len(args["city"]), 12)
    test.assertIn(args["unit"], ("celsius", "fahrenheit"))


def one_call_of_the_tools(test, choice):
    """The choice's one call, to get_weather (its arguments fit) or get_time; no text beside it."""
    test.assertEqual(choice.finish_reason, "tool_calls", choice.message)
    test.assertFalse(choice.message.content)
    test.assertEqual(len(choice.message.tool_calls), 1)
    call = choice.message.tool_calls[0]
    if call.function.name == "get_weather":
        check_weather_call(test, call)
    else:
        test.assertEqual(json.loads(call.function.arguments), {})
    return call

def required_and_named_calls(test, client, max_tokens=150):
    """A required call and a call named get_weather, whole and streamed: one call of the tools each.
    (`max_tokens`: DeepSeek's markers are ~25 bytes each, one aidreams token a byte.)"""
    for stream in (False, True):
        for choice_arg in ("required", {"type": "function", "function": {"name": "get_weather"}}):
            args = dict(model="aidreams", messages=MESSAGES, max_tokens=max_tokens, temperature=0,
                        tools=[WEATHER, TIME], tool_choice=choice_arg, parallel_tool_calls=False)
            one_call_of_the_tools(test, final_choice(client, stream, args))


class TestTools(unittest.TestCase):
    def test_required_and_named_choices_give_calls_that_fit(self):
        for temperature, seed in ((0, 1), (1.0, 2), (1.0, 3)):
            r = chat(temperature=temperature, seed=seed, tool_choice="required")
            choice = r.choices[0]
            self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
            self.assertGreaterEqual(len(choice.message.tool_calls), 1)
            for call in choice.message.tool_calls:
                self.assertIn(call.function.name, ("get_weather", "get_time"))
                if call.function.name == "get_weather":
                    check_weather_call(self, call)
                else:
                    self.assertEqual(json.loads(call.function.arguments), {})
        r = chat(tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False)
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertIsNone(choice.message.content)
        self.assertEqual(len(choice.message.tool_calls), 1)  # one call at most
        check_weather_call(self, choice.message.tool_calls[0])

    def test_streamed_calls_equal_the_whole_response(self):
        whole = chat(tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False)
        calls, reasons, content, pieces = {}, [], "", 0
        for chunk in chat(tool_choice={"type": "function", "function": {"name": "get_weather"}},
                          parallel_tool_calls=False, stream=True):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            content += delta.content or ""
            for piece in delta.tool_calls or []:
                # As OpenAI streams a call: id, type and name in its first piece, then only
                # pieces of the arguments under its index.
                if piece.index not in calls:
                    self.assertTrue(piece.id and piece.type == "function" and piece.function.name, piece)
                else:
                    self.assertIsNone(piece.id)
                    self.assertIsNone(piece.function.name)
                entry = calls.setdefault(piece.index, {"id": piece.id, "name": piece.function.name, "arguments": ""})
                entry["arguments"] += piece.function.arguments or ""
                pieces += 1
            reasons.append(chunk.choices[0].finish_reason)
        self.assertEqual(reasons[-1], "tool_calls")
        self.assertEqual(content, "")
        self.assertEqual(len(calls), 1)
        expected = whole.choices[0].message.tool_calls[0].function
        self.assertEqual((calls[0]["name"], calls[0]["arguments"]), (expected.name, expected.arguments))
        self.assertTrue(calls[0]["id"].startswith("call_"))
        self.assertGreater(pieces, 3)  # the arguments arrive as they are written
        # The client's own accumulation (what agents use) reads the same call, and its events
        # give the arguments piece by piece.
        with CLIENT.chat.completions.stream(model="aidreams", messages=MESSAGES, max_tokens=100, temperature=0,
                                            logit_bias=NO_WHITESPACE, tools=[WEATHER, TIME],
                                            tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                            parallel_tool_calls=False) as stream:
            events = [e for e in stream if e.type.startswith("tool_calls.function.arguments")]
            final = stream.get_final_completion()
        self.assertEqual(final.choices[0].message.tool_calls[0].function.arguments, expected.arguments)
        self.assertGreater(sum(e.type == "tool_calls.function.arguments.delta" for e in events), 3)
        self.assertEqual(events[-1].type, "tool_calls.function.arguments.done")
        self.assertEqual(events[-1].arguments, expected.arguments)

    def test_the_clients_pydantic_tool_and_parse(self):
        # pydantic_function_tool sends a strict schema (additionalProperties false, bounds,
        # maxLength); parse reads the call's arguments back into the model.
        r = CLIENT.chat.completions.parse(model="aidreams", messages=[{"role": "user", "content": "Order two cakes"}],
                                          tools=[openai.pydantic_function_tool(Order)], tool_choice="required",
                                          max_tokens=100, temperature=0, logit_bias=NO_WHITESPACE)
        call = r.choices[0].message.tool_calls[0]
        self.assertEqual(call.function.name, "Order")
        self.assertIsInstance(call.function.parsed_arguments, Order)
        self.assertTrue(1 <= call.function.parsed_arguments.count <= 5)
        self.assertLessEqual(len(call.function.parsed_arguments.item), 10)

    def test_auto_lets_the_model_answer_in_text(self):
        # A story model does not call tools by itself: its reply stays text.
        r = chat(tool_choice="auto", max_tokens=30)
        choice = r.choices[0]
        self.assertIsNone(choice.message.tool_calls)
        self.assertTrue(choice.message.content)
        self.assertIn(choice.finish_reason, ("stop", "length"))

    def test_conversation_with_calls_and_results_renders_as_the_template_does(self):
        conversation = MESSAGES + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"celsius\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
        ]
        status, body, _ = SERVER.post("/apply-template", {"messages": conversation, "tools": [WEATHER]})
        self.assertEqual(status, 200, body)
        prompt = json.loads(body)["prompt"]
        # No default system text in this template (as Qwen3's): the tools open the system turn.
        self.assertTrue(prompt.startswith("<|im_start|>system\n# Tools\n"), prompt)
        # The tool as the client wrote it (key order kept), then the call and the result.
        self.assertIn('\n{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a '
                      'city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": '
                      '12}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}}\n</tools>',
                      prompt)
        self.assertIn('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
                      '"unit": "celsius"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n21 degrees\n'
                      '</tool_response><|im_end|>\n<|im_start|>assistant\n', prompt)
        # The same conversation generates (the model answers after the result).
        r = chat(messages=conversation, max_tokens=20)
        self.assertTrue(r.choices[0].message.content)
        # tool_choice "none": the model is not shown the tools.
        status, body, _ = SERVER.post("/apply-template", {"messages": MESSAGES, "tools": [WEATHER], "tool_choice": "none"})
        self.assertNotIn("# Tools", json.loads(body)["prompt"])

    def test_what_cannot_be_honoured_is_a_400(self):
        strict = {"type": "function", "function": {"name": "f", "strict": True, "parameters": {
            "type": "object", "properties": {"id": {"type": "integer", "multipleOf": 5}}}}}
        cases = [
            ({"tools": [{"type": "retrieval"}]}, "tools[0]", "only functions"),
            ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name", "letters"),
            ({"tools": [TIME, TIME]}, "tools[1].function.name", "given twice"),
            ({"tools": [strict]}, "tools", "strict tool 'f'"),
            ({"tool_choice": "required"}, "tool_choice", "needs 'tools'"),
            ({"tools": [TIME], "tool_choice": "sometimes"}, "tool_choice", "\"required\""),
            ({"tools": [TIME], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, "tool_choice",
             "no tool is named 'get_weather'"),
            ({"tools": [TIME], "response_format": {"type": "json_object"}}, "tools", "not both"),
            ({"tools": [TIME], "parallel_tool_calls": "yes"}, "parallel_tool_calls", "true or false"),
            ({"functions": [{"name": "f"}]}, "functions", "give 'tools'"),
            ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, "messages[0].role", "tool"),
            ({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]},
             "messages[0].tool_calls", "tool_calls must be"),
            # Arguments are JSON inside a string: their nesting is bounded apart from the body's.
            ({"messages": [{"role": "assistant", "tool_calls": [
                {"function": {"name": "f", "arguments": "[" * 100000}}]}]},
             "messages[0].tool_calls", "nests deeper than 64"),
        ]
        fx.assert_bad_requests(self, CLIENT, cases)
        # Tools belong to chat: the text completions endpoint refuses them.
        with self.assertRaises(openai.BadRequestError) as e:
            CLIENT.completions.create(model="aidreams", prompt="hi", max_tokens=5, extra_body={"tools": [TIME]})
        self.assertIn("/v1/chat/completions", e.exception.body["message"])
        self.assertEqual(SERVER.get("/health")[0], 200)

    def test_llama_3_format(self):
        # The same model served with a Llama 3.1-style template (its markers are what the family
        # and the tool format are recognised by): tools in the first user message, calls as the
        # whole reply {"name", "parameters"}, one call.
        llama31 = ('{{- bos_token }}{%- set date_string = "26 Jul 2024" %}'
                   '{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}'
                   '{{- "Cutting Knowledge Date: December 2023\\n" }}')
        with fx.Server(MODEL, "--chat-template", llama31, "-c", "2048") as llama:
            client = fx.openai_client(llama)
            status, body, _ = llama.post("/apply-template", {"messages": MESSAGES, "tools": [TIME]})
            prompt = json.loads(body)["prompt"]
            # Today's date, as llama-server gives Llama 3.1+ templates.
            self.assertIn("<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: "
                          "December 2023\nToday Date: " + time.strftime("%d %b %Y") + "\n\n<|eot_id|>", prompt)
            self.assertIn('{\n    "type": "function",\n    "function": {\n        "name": "get_time",', prompt)
            self.assertTrue(prompt.endswith("What is the weather in Paris?<|eot_id|><|start_header_id|>assistant"
                                            "<|end_header_id|>\n\n"), prompt)
            for stream in (False, True):
                args = dict(model="aidreams", messages=MESSAGES, max_tokens=100, temperature=0,
                            logit_bias=NO_WHITESPACE, tools=[WEATHER, TIME], tool_choice="required")
                if not stream:
                    choice = client.chat.completions.create(**args).choices[0]
                    self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
                    self.assertIsNone(choice.message.content)
                    calls = choice.message.tool_calls
                else:
                    with client.chat.completions.stream(**args) as s:
                        final = s.get_final_completion()
                    self.assertEqual(final.choices[0].finish_reason, "tool_calls")
                    calls = final.choices[0].message.tool_calls
                self.assertEqual(len(calls), 1)  # Llama 3 makes one call per turn
                if calls[0].function.name == "get_weather":
                    check_weather_call(self, calls[0])
                else:
                    self.assertEqual(json.loads(calls[0].function.arguments), {})
            # auto: the story model's reply does not open with "{": text.
            r = client.chat.completions.create(model="aidreams", messages=MESSAGES, max_tokens=20, temperature=0,
                                               tools=[WEATHER])
            self.assertIsNone(r.choices[0].message.tool_calls)
            self.assertTrue(r.choices[0].message.content)
            self.assertEqual(llama.stop(), 0)

    def test_mistral_formats(self):
        # Served with Mistral-style templates (the markers Small 3.2's and Nemo's are recognised
        # by): [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} per call, and Nemo's one JSON list; call ids
        # of 9 letters and digits, as their templates take them back.
        small32 = ("{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}{%- if tools is not none and "
                   "(message == user_messages[-1]) %}{{- '[INST]' }}{{- '[TOOL_CALLS]' + name }}"
                   "{{- '[CALL_ID]' + tool_call.id }}{{- '[ARGS]' + arguments }}")
        nemo = ('{%- if tools is not none and (message == user_messages[-1]) %}{{- "[AVAILABLE_TOOLS][" }}'
                '{{- "[INST]" + message["content"] + "[/INST]" }}{{- "[TOOL_CALLS][" }}')
        for template, prompt_end in ((small32, "[INST]What is the weather in Paris?[/INST]"),
                                     (nemo, "[/AVAILABLE_TOOLS][INST]What is the weather in Paris?[/INST]")):
            with fx.Server(MODEL, "--chat-template", template, "-c", "2048") as mistral:
                client = fx.openai_client(mistral)
                status, body, _ = mistral.post("/apply-template", {"messages": MESSAGES, "tools": [TIME]})
                prompt = json.loads(body)["prompt"]
                self.assertIn('[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_time"', prompt)
                self.assertTrue(prompt.endswith(prompt_end), prompt)
                for stream in (False, True):
                    args = dict(model="aidreams", messages=MESSAGES, max_tokens=100, temperature=0,
                                logit_bias=NO_WHITESPACE, tools=[WEATHER, TIME], tool_choice="required",
                                parallel_tool_calls=False)
                    choice = final_choice(client, stream, args)
                    self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
                    calls = choice.message.tool_calls
                    self.assertEqual(len(calls), 1, calls)
                    self.assertRegex(calls[0].id, "^[a-zA-Z0-9]{9}$")
                    if calls[0].function.name == "get_weather":
                        self.assertEqual(set(json.loads(calls[0].function.arguments)), {"city", "unit"})
                    else:
                        self.assertEqual(json.loads(calls[0].function.arguments), {})
                    # The call and its result sent back render as the template takes them.
                    back = MESSAGES + [{"role": "assistant", "content": None, "tool_calls": [calls[0].model_dump()]},
                                       {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"}]
                    status, body, _ = mistral.post("/apply-template", {"messages": back, "tools": [TIME]})
                    self.assertEqual(status, 200, body)
                    self.assertIn(calls[0].id, json.loads(body)["prompt"])
                # An id the template cannot take back: 400 in its words.
                bad = MESSAGES + [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}]
                with self.assertRaises(openai.BadRequestError) as e:
                    client.chat.completions.create(model="aidreams", messages=bad, max_tokens=5, tools=[TIME])
                self.assertIn("9 letters and digits", e.exception.body["message"])
                self.assertEqual(mistral.stop(), 0)

    def test_granite_format(self):
        # Served with a Granite-style template: the tools in an available_tools turn, the calls
        # one JSON list after <|tool_call|>.
        # Given as a file (llama-server's --chat-template-file).
        granite = "{{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_text|>' }}"
        template_file = os.path.join(tempfile.mkdtemp(), "granite.jinja")
        with open(template_file, "w") as f:
            f.write(granite)
        with fx.Server(MODEL, "--chat-template-file", template_file, "-c", "2048") as server:
            client = fx.openai_client(server)
            status, body, _ = server.post("/apply-template", {"messages": MESSAGES, "tools": [TIME]})
            self.assertIn('<|start_of_role|>available_tools<|end_of_role|>[\n    {\n        "type": "function"',
                          json.loads(body)["prompt"])
            for stream in (False, True):
                args = dict(model="aidreams", messages=MESSAGES, max_tokens=100, temperature=0,
                            logit_bias=NO_WHITESPACE, tools=[WEATHER, TIME], parallel_tool_calls=False,
                            tool_choice={"type": "function", "function": {"name": "get_weather"}})
                choice = final_choice(client, stream, args)
                self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
                self.assertEqual(len(choice.message.tool_calls), 1)
                check_weather_call(self, choice.message.tool_calls[0])
            self.assertEqual(server.stop(), 0)

    def test_chat_template_file_refusals(self):
        # A template file that cannot be read, or one given beside --chat-template: a usage error
        # naming it, before anything loads.
        for extra, words in ((["--chat-template-file", "/nonexistent/t.jinja"], "cannot read the chat template file"),
                             (["--chat-template-file", MODEL, "--chat-template", "chatml"], "give one")):
            r = subprocess.run([fx.ARGS.iwb, "serve", "-m", MODEL] + extra, capture_output=True, text=True,
                               timeout=60)
            self.assertNotEqual(r.returncode, 0, extra)
            self.assertIn(words, r.stderr, extra)

    def test_harmony_format(self):
        # Served with a harmony-style template (gpt-oss's markers): the tools as a TypeScript
        # namespace in the developer message, a call as a commentary message to=functions.NAME.
        harmony = "{{- '<|start|>system<|message|>' }}{{- 'Current date: ' + strftime_now('%Y-%m-%d') }}"
        with fx.Server(MODEL, "--chat-template", harmony, "-c", "2048") as server:
            client = fx.openai_client(server)
            status, body, _ = server.post("/apply-template", {"messages": MESSAGES, "tools": [WEATHER, TIME]})
            prompt = json.loads(body)["prompt"]
            self.assertIn("Current date: " + time.strftime("%Y-%m-%d") + "\n", prompt)
            self.assertIn("// Current weather in a city\ntype get_weather = (_: {\ncity: string,\nunit: any,\n}) => "
                          "any;\n\n// The time now\ntype get_time = () => any;", prompt)
            for stream in (False, True):
                args = dict(model="aidreams", messages=MESSAGES, max_tokens=100, temperature=0,
                            logit_bias=NO_WHITESPACE, tools=[WEATHER, TIME], tool_choice="required")
                call = one_call_of_the_tools(self, final_choice(client, stream, args))  # no header in the text
                # The call and its result sent back: the template's own form of both.
                back = MESSAGES + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                                   {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
                status, body, _ = server.post("/apply-template", {"messages": back, "tools": [TIME]})
                self.assertIn("<|start|>assistant to=functions." + call.function.name +
                              "<|channel|>commentary json<|message|>", json.loads(body)["prompt"])
                self.assertIn("<|start|>functions." + call.function.name +
                              ' to=assistant<|channel|>commentary<|message|>"sunny"<|end|>', json.loads(body)["prompt"])
            self.assertEqual(server.stop(), 0)

    def test_qwen3_coder_format(self):
        # Served with a Qwen3-Coder-style template: the tools as <function> tags, each call's
        # arguments as <parameter=KEY> tags whose values are text (a string's raw, others JSON).
        coder = ("{{- '<|im_start|>system\\n' }}{{- 'You have access to the following tools:' }}"
                 "{{- '<parameter=example_parameter_1>' }}")
        with fx.Server(MODEL, "--chat-template", coder, "-c", "2048") as server:
            client = fx.openai_client(server)
            status, body, _ = server.post("/apply-template", {"messages": MESSAGES, "tools": [WEATHER, TIME]})
            self.assertIn("<function>\n<name>get_weather</name>\n<description>Current weather in a city</description>\n"
                          "<parameters>\n<parameter>\n<name>city</name>\n<type>string</type>\n<maxLength>12</maxLength>",
                          json.loads(body)["prompt"])
            required_and_named_calls(self, client)
            # The call and its result sent back render as the template takes them.
            status, body, _ = server.post("/apply-template", {"messages": SENT_BACK, "tools": [WEATHER]})
            self.assertIn("<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                          "</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
                          "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<|im_end|>\n",
                          json.loads(body)["prompt"])
            self.assertEqual(server.stop(), 0)

    def test_qwen35_format(self):
        # Served with Qwen3.5's template (llama.cpp's copy): its generation prompt opens the think
        # block ("<think>\n"), so a required call first closes it as the template closes a past
        # turn's ("\n</think>\n\n"): the prompt and the raw reply are what the template writes
        # when the call comes back, and no reasoning or text is read from the lead.
        template = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", "Qwen3.5-4B.jinja")
        with fx.Server(MODEL, "--chat-template-file", template, "-c", "2048") as server:
            client = fx.openai_client(server)
            status, body, _ = server.post("/apply-template", {"messages": MESSAGES, "tools": [WEATHER, TIME]})
            prompt = json.loads(body)["prompt"]
            self.assertTrue(prompt.endswith("<|im_start|>assistant\n<think>\n"), prompt)
            required_and_named_calls(self, client)
            r = client.chat.completions.create(model="aidreams", messages=MESSAGES, max_tokens=150, temperature=0,
                                               tools=[WEATHER], tool_choice="required", logprobs=True)
            choice = r.choices[0]
            self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
            self.assertFalse((choice.message.model_extra or {}).get("reasoning_content"), choice.message)
            raw = "".join(t.token for t in choice.logprobs.content)
            head = "\n</think>\n\n<tool_call>\n<function=get_weather>\n"
            self.assertTrue(raw.startswith(head), repr(raw))
            call = choice.message.tool_calls[0]
            sent_back = MESSAGES + [{"role": "assistant", "content": None, "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
                {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
            status, body, _ = server.post("/apply-template", {"messages": sent_back, "tools": [WEATHER]})
            self.assertIn("<|im_start|>assistant\n<think>\n" + head, json.loads(body)["prompt"])
            self.assertEqual(server.stop(), 0)

    def test_glm_formats(self):
        # Served with GLM-4.6-style and GLM-4.7-style templates: calls as <tool_call>NAME and
        # <arg_key>/<arg_value> tags (4.7 without newlines, its generation prompt opening <think>,
        # which a required call closes first).
        for compact in (False, True):
            line = "" if compact else "\n"
            glm = "[gMASK]<sop>{{ '<|observation|>' }}<arg_key>{arg-key-1}</arg_key>" + line + "<arg_value>"
            with fx.Server(MODEL, "--chat-template", glm, "-c", "2048") as server:
                client = fx.openai_client(server)
                status, body, _ = server.post("/apply-template", {"messages": MESSAGES, "tools": [WEATHER, TIME]})
                prompt = json.loads(body)["prompt"]
                self.assertIn("<tool_call>{function-name}" + line + "<arg_key>{arg-key-1}</arg_key>" + line, prompt)
                self.assertTrue(prompt.endswith("<|user|>" + line + "What is the weather in Paris?<|assistant|>" +
                                                ("<think>" if compact else "")), prompt)
                required_and_named_calls(self, client)
                # The call and its result sent back render as the template takes them.
                status, body, _ = server.post("/apply-template", {"messages": SENT_BACK, "tools": [WEATHER]})
                think = "</think>" if compact else "\n<think></think>\n"
                self.assertIn("<|assistant|>" + think + "<tool_call>get_weather" + line + "<arg_key>city</arg_key>" +
                              line + "<arg_value>Paris</arg_value>" + line + "<arg_key>unit</arg_key>" + line +
                              "<arg_value>celsius</arg_value>" + line + "</tool_call><|observation|>" + line +
                              "<tool_response>" + line + "sunny" + line + "</tool_response><|assistant|>",
                              json.loads(body)["prompt"])
                self.assertEqual(server.stop(), 0)

    def test_section_formats(self):
        # Served with DeepSeek V3.1-style and Kimi K2-style templates: calls in a section of
        # special tokens around each call's name and JSON arguments (DeepSeek with thinking on:
        # its generation prompt opens <think>, which a required call closes first; Kimi's calls
        # named functions.NAME:N, which is their id).
        deepseek = "{{ bos_token }}<｜User｜><｜Assistant｜><｜tool▁sep｜><｜tool▁output▁begin｜>"
        kimi = "<|im_system|>tool_declare<|im_middle|><|tool_calls_section_begin|>{{ tool_response_queue }}"
        call = ('{"city": "Paris", "unit": "celsius"}')
        cases = (
            (deepseek, ("--chat-template-kwargs", '{"thinking": true}'),
             "<｜User｜>What is the weather in Paris?<｜Assistant｜><think>",
             "<｜Assistant｜><think></think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + call +
             "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>sunny<｜tool▁output▁end｜>"),
            (kimi, (), "<|im_user|>user<|im_middle|>What is the weather in Paris?<|im_end|>"
                       "<|im_assistant|>assistant<|im_middle|>",
             "<|im_assistant|>assistant<|im_middle|><|tool_calls_section_begin|><|tool_call_begin|>"
             "functions.get_weather:0<|tool_call_argument_begin|>" + call + "<|tool_call_end|>"
             "<|tool_calls_section_end|><|im_end|><|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\n"
             "sunny<|im_end|><|im_assistant|>assistant<|im_middle|>"))
        for template, flags, prompt_end, sent_back in cases:
            with fx.Server(MODEL, "--chat-template", template, "-c", "2048", *flags) as server:
                client = fx.openai_client(server)
                status, body, _ = server.post("/apply-template", {"messages": MESSAGES, "tools": [WEATHER, TIME]})
                self.assertTrue(json.loads(body)["prompt"].endswith(prompt_end), json.loads(body)["prompt"])
                required_and_named_calls(self, client, max_tokens=600)
                for stream in (False, True):  # several calls in one section
                    args = dict(model="aidreams", messages=MESSAGES, max_tokens=600, temperature=0,
                                tools=[WEATHER, TIME], tool_choice="required")
                    choice = final_choice(client, stream, args)
                    self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
                    for c in choice.message.tool_calls:
                        self.assertIn(c.function.name, ("get_weather", "get_time"))
                        if template == kimi:
                            self.assertRegex(c.id, r"^functions\.(get_weather|get_time):[0-9]+$")
                status, body, _ = server.post("/apply-template", {"messages": SENT_BACK, "tools": [WEATHER]})
                self.assertTrue(json.loads(body)["prompt"].endswith(sent_back), json.loads(body)["prompt"])
                self.assertEqual(server.stop(), 0)

    def test_reasoning_preserve(self):
        # llama-server's --reasoning-preserve (GLM-4.7's clear_thinking false): an earlier turn's
        # reasoning stays in the prompt; without it the template leaves it out; a request's
        # chat_template_kwargs still decide for that request.
        glm47 = "[gMASK]<sop>{{ '<|observation|>' }}<arg_key>{arg-key-1}</arg_key><arg_value>"
        earlier = [{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet."},
                   {"role": "user", "content": "Bye"}]
        for flags, kept in (((), False), (("--reasoning-preserve",), True), (("--no-reasoning-preserve",), False)):
            with fx.Server(MODEL, "--chat-template", glm47, "-c", "2048", *flags) as server:
                status, body, _ = server.post("/apply-template", {"messages": earlier})
                self.assertEqual(status, 200)
                self.assertEqual("<think>Greet.</think>Hello!" in json.loads(body)["prompt"], kept, flags)
                status, body, _ = server.post("/apply-template", {
                    "messages": earlier, "chat_template_kwargs": {"clear_thinking": kept}})
                self.assertEqual("<think>Greet.</think>" in json.loads(body)["prompt"], not kept, flags)
                self.assertEqual(server.stop(), 0)

    def test_a_template_without_a_tool_format_refuses_tools(self):
        # The same model served with its own (plain) template: tools cannot be rendered.
        with fx.Server(MODEL) as plain:
            client = fx.openai_client(plain)
            with self.assertRaises(openai.BadRequestError) as e:
                client.chat.completions.create(model="aidreams", messages=MESSAGES, max_tokens=5, tools=[TIME])
            self.assertEqual(e.exception.body["param"], "tools")
            self.assertIn("this model's is plain", e.exception.body["message"])
            self.assertEqual(plain.stop(), 0)


if __name__ == "__main__":
    # The tools header is ~500 of aidreams' tokens: the context is stretched past its 128 (the
    # replies are still held to the grammar; their words do not matter here).
    fx.serve_module(__name__, fx.aidreams_gguf(), ["--chat-template", "chatml", "-c", "2048"], REST)
