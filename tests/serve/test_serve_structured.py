"""Structured output and logit bias over the API, driven by the official openai client against a
real `iwb serve` (aidreams model): response_format json_schema and json_object, the client's own
`parse` with a pydantic model (its strict schema: $defs, $ref, enums, additionalProperties
false, bounds), llama-server's `json_schema` field, vLLM's guided_choice / guided_json /
structured_outputs, streaming, n > 1; logit_bias moving and banning
tokens; and OpenAI-shaped 400s for schemas and biases the server cannot honour."""

import json
import unittest
from typing import Literal

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=True)

import openai  # noqa: E402  (from the virtual environment)
import pydantic  # noqa: E402  (installed with openai)

MODEL = None
SERVER = None
CLIENT = None
PROMPT = "Once upon a time"
# A story model pads JSON with newlines and indentation wherever the grammar lets it (a newline
# and up to 20 spaces between any two tokens); with the context at 128 tokens the replies here
# ban the whitespace-only tokens by logit_bias, which tests the two together.
NO_WHITESPACE = {}

SCHEMA = {
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
        "n": {"type": "integer"},
    },
    "required": ["color", "ok", "n"],
    "additionalProperties": False,
}


class Pet(pydantic.BaseModel):
    kind: Literal["cat", "dog"]
    happy: bool


class Answer(pydantic.BaseModel):
    pet: Pet
    count: int = pydantic.Field(ge=1, le=9)  # minimum and maximum in the schema


def check_fits(test, value):
    test.assertEqual(set(value), {"color", "ok", "n"})
    test.assertIn(value["color"], ("red", "green", "blue"))
    test.assertIsInstance(value["ok"], bool)
    test.assertIsInstance(value["n"], int)


def chat(**kwargs):
    args = dict(model="aidreams", messages=[{"role": "user", "content": PROMPT}], max_tokens=100, temperature=0,
                logit_bias=NO_WHITESPACE)
    args.update(kwargs)
    return CLIENT.chat.completions.create(**args)


class TestStructuredOutput(unittest.TestCase):
    def test_json_schema_replies_fit_and_stop(self):
        for temperature, seed in ((0, 1), (1.0, 2), (1.0, 3)):
            r = chat(temperature=temperature, seed=seed,
                     response_format={"type": "json_schema",
                                      "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}})
            choice = r.choices[0]
            self.assertEqual(choice.finish_reason, "stop", choice.message.content)
            check_fits(self, json.loads(choice.message.content))

    def test_n_choices_and_streaming_fit_too(self):
        fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}
        r = chat(temperature=1.0, seed=5, n=3, response_format=fmt)
        self.assertEqual(len(r.choices), 3)
        for c in r.choices:
            check_fits(self, json.loads(c.message.content))
        pieces, reasons = [], []
        for chunk in chat(temperature=1.0, seed=6, stream=True, response_format=fmt):
            if chunk.choices:
                pieces.append(chunk.choices[0].delta.content or "")
                reasons.append(chunk.choices[0].finish_reason)
        check_fits(self, json.loads("".join(pieces)))
        self.assertEqual(reasons[-1], "stop")

    def test_the_clients_parse_with_a_pydantic_model(self):
        # openai's parse sends the model's strict schema ($defs, $ref, enum, additionalProperties
        # false, titles, minimum/maximum) and reads the reply back into the model.
        r = CLIENT.chat.completions.parse(model="aidreams", messages=[{"role": "user", "content": PROMPT}],
                                          response_format=Answer, max_tokens=100, temperature=0,
                                          logit_bias=NO_WHITESPACE)
        parsed = r.choices[0].message.parsed
        self.assertIsInstance(parsed, Answer)
        self.assertIn(parsed.pet.kind, ("cat", "dog"))
        self.assertTrue(1 <= parsed.count <= 9, parsed)

    def test_json_object_mode_and_llama_server_field(self):
        r = chat(temperature=0.7, seed=9, max_tokens=110, response_format={"type": "json_object"})
        text = r.choices[0].message.content
        self.assertTrue(text.startswith("{"), text)
        if r.choices[0].finish_reason == "stop":
            self.assertIsInstance(json.loads(text), dict)
        # llama-server's top-level "json_schema" on the text completions endpoint.
        r = CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=100, temperature=0,
                                      logit_bias=NO_WHITESPACE, extra_body={"json_schema": {"enum": ["yes", "no"]}})
        self.assertIn(r.choices[0].text, ('"yes"', '"no"'))
        self.assertEqual(r.choices[0].finish_reason, "stop")
        # {"type": "text"} is free text, as before.
        self.assertFalse(chat(response_format={"type": "text"}, max_tokens=20).choices[0].message.content.startswith("{"))

    def test_vllm_guided_fields(self):
        # guided_choice: the reply is one of the texts as written (not JSON).
        choices = ["positive", "negative", "neutral"]
        for seed in (1, 2, 3):
            r = chat(temperature=1.0, seed=seed, extra_body={"guided_choice": choices})
            self.assertIn(r.choices[0].message.content, choices)
            self.assertEqual(r.choices[0].finish_reason, "stop")
        r = chat(extra_body={"structured_outputs": {"choice": ["cat", "dog"]}})
        self.assertIn(r.choices[0].message.content, ("cat", "dog"))
        # guided_json as an object or as its text, and vLLM 0.10's structured_outputs.json.
        for extra in ({"guided_json": SCHEMA}, {"guided_json": json.dumps(SCHEMA)}, {"structured_outputs": {"json": SCHEMA}}):
            r = chat(extra_body=extra)
            check_fits(self, json.loads(r.choices[0].message.content))

    def test_regexes_guided_and_in_schemas(self):
        # vLLM's guided_regex: the reply's raw text matches the whole pattern (re.fullmatch), for
        # greedy and sampled replies, and through structured_outputs.regex.
        pattern = r"(yes|no), because [a-z ]{3,20}\."
        for temperature, seed in ((0, 0), (1.0, 1), (1.0, 2)):
            r = chat(temperature=temperature, seed=seed, max_tokens=60, logit_bias={}, extra_body={"guided_regex": pattern})
            self.assertRegex(r.choices[0].message.content, "^" + pattern + "$")
            self.assertEqual(r.choices[0].finish_reason, "stop")
        r = chat(max_tokens=30, extra_body={"structured_outputs": {"regex": r"[0-9]{4}-[0-9]{2}"}})
        self.assertRegex(r.choices[0].message.content, r"^[0-9]{4}-[0-9]{2}$")
        # A schema's pattern (anchored and not): the string fits it, as a JSON Schema validator says.
        schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
                                                   "note": {"type": "string", "pattern": "ok", "maxLength": 12}},
                  "required": ["code", "note"], "additionalProperties": False}
        for seed in (1, 2):
            r = chat(temperature=1.0, seed=seed, max_tokens=80,
                     response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}})
            value = json.loads(r.choices[0].message.content)
            self.assertRegex(value["code"], "^[A-Z]{2}-[0-9]{3}$")
            self.assertIn("ok", value["note"])
            self.assertLessEqual(len(value["note"]), 12)

    def test_logit_bias_moves_and_bans_tokens(self):
        def first_token(**extra):
            r = CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=1, temperature=0, logprobs=0,
                                          **extra)
            return r.choices[0].text
        plain = first_token()
        status, body, _ = SERVER.post("/tokenize", {"content": plain, "add_special": False, "with_pieces": True})
        ids = [t["id"] for t in json.loads(body)["tokens"] if t["piece"] == plain]
        self.assertEqual(len(ids), 1, body)
        self.assertNotEqual(first_token(logit_bias={str(ids[0]): -100}), plain)
        status, body, _ = SERVER.post("/detokenize", {"tokens": [300]})
        forced = json.loads(body)["content"]
        self.assertEqual(first_token(logit_bias={"300": 100}).strip(), forced.strip())

    def test_what_cannot_be_honoured_is_a_400(self):
        cases = [
            ({"response_format": {"type": "json_schema",
                                  "json_schema": {"name": "a", "schema": {"type": "integer", "multipleOf": 5}}}},
             "response_format", "'multipleOf' is not supported"),
            ({"response_format": {"type": "xml"}}, "response_format", "json_schema"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "a"}}}, "response_format",
             "needs"),
            ({"response_format": {"type": "json_schema",
                                  "json_schema": {"name": "a", "schema": {"$ref": "#/$defs/missing"}}}},
             "response_format", "names nothing"),
            ({"logit_bias": {"5": 101}}, "logit_bias", "-100 to 100"),
            ({"logit_bias": {"five": 1}}, "logit_bias", "token ids"),
            ({"logit_bias": {"512": 1}}, "logit_bias", "outside the vocabulary (512 tokens)"),
            ({"json_schema": {"type": "integer", "multipleOf": 5}}, "json_schema", "'multipleOf' is not supported"),
            ({"json_schema": {"type": "string", "pattern": "(?<=a)b"}}, "json_schema", "lookaround"),
            ({"guided_regex": "([a-z]+"}, "guided_regex", "a '(' without ')'"),
            ({"guided_regex": 5}, "guided_regex", "a string (a regex)"),
            ({"guided_regex": "a", "guided_choice": ["a"]}, "guided_regex", "give one of"),
            ({"grammar": "root ::= \"a\""}, "grammar", "not supported"),
            ({"guided_choice": []}, "guided_choice", "non-empty list"),
            ({"guided_choice": ["a", 3]}, "guided_choice", "non-empty list"),
            ({"guided_json": SCHEMA, "response_format": {"type": "json_object"}}, "response_format", "give one of"),
            ({"structured_outputs": {"grammar": "root ::= \"a\""}}, "structured_outputs", "\"regex\""),
        ]
        fx.assert_bad_requests(self, CLIENT, cases)
        self.assertEqual(SERVER.get("/health")[0], 200)


if __name__ == "__main__":
    fx.serve_module(__name__, fx.aidreams_gguf(), [], REST)
