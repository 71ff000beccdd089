"""Tool calling with a real tool-calling model: the default Qwen2.5-Coder-1.5B-Instruct behind
`iwb serve`, driven by the official openai client (skips without the model; not under the
sanitizers, too slow there). Its own template: the default system text and the doubled-brace
call example in the prompt; tool_choice "required" and a named function give calls whose
arguments fit; streamed and whole calls agree; an agent loop (call, tool result, answer) runs."""

import json
import unittest

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=True)

import openai  # noqa: E402,F401  (from the virtual environment)

SERVER = None
CLIENT = None
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"]}}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris right now?"}]


def ask(**kwargs):
    args = dict(model="qwen", messages=QUESTION, tools=[WEATHER], temperature=0, max_tokens=120)
    args.update(kwargs)
    return CLIENT.chat.completions.create(**args)


class TestToolsWithQwen(unittest.TestCase):
    def test_prompt_is_the_models_own(self):
        status, body, _ = SERVER.post("/apply-template", {"messages": QUESTION, "tools": [WEATHER]})
        prompt = json.loads(body)["prompt"]
        self.assertTrue(prompt.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
                                          "helpful assistant.\n\n# Tools\n"), prompt)
        self.assertIn('<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>', prompt)

    def test_required_call_fits_and_streams_the_same(self):
        r = ask(tool_choice="required")
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
        call = choice.message.tool_calls[0]
        self.assertEqual(call.function.name, "get_weather")
        args = json.loads(call.function.arguments)
        self.assertEqual(set(args), {"city", "unit"})
        self.assertIn("Paris", args["city"])
        self.assertIn(args["unit"], ("celsius", "fahrenheit"))
        with CLIENT.chat.completions.stream(model="qwen", messages=QUESTION, tools=[WEATHER], temperature=0,
                                            max_tokens=120, tool_choice="required") as stream:
            final = stream.get_final_completion()
        streamed = [(c.function.name, c.function.arguments) for c in final.choices[0].message.tool_calls]
        self.assertEqual(streamed, [(c.function.name, c.function.arguments) for c in choice.message.tool_calls])

    def test_agent_loop(self):
        # Call, run the tool, send its result back: the model answers from it.
        first = ask(tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False)
        message = first.choices[0].message
        self.assertEqual(len(message.tool_calls), 1)
        call = message.tool_calls[0]
        conversation = QUESTION + [message.model_dump(exclude_none=True),
                                   {"role": "tool", "tool_call_id": call.id,
                                    "content": json.dumps({"city": "Paris", "temperature": 21, "sky": "clear"})}]
        status, body, _ = SERVER.post("/apply-template", {"messages": conversation, "tools": [WEATHER]})
        self.assertIn("<tool_response>\n{\"city\": \"Paris\", \"temperature\": 21, \"sky\": \"clear\"}\n"
                      "</tool_response>", json.loads(body)["prompt"])
        answer = ask(messages=conversation, tool_choice="none")
        self.assertEqual(answer.choices[0].finish_reason, "stop")
        self.assertIn("21", answer.choices[0].message.content)


if __name__ == "__main__":
    fx.serve_module(__name__, fx.default_model(), [], REST)
