"""A real `iwb serve` (aidreams model, free loopback port) driven by the official openai client:
models, plain and streamed chat and text completions, stop strings, n > 1, seeds, logprobs,
usage and llama-server's timings; greedy output over the API equals `iwb run` on the same
prompt; OpenAI-shaped errors (unknown role, n too large, a prompt that cannot fit, a full
queue, a wrong API key); /tokenize and /detokenize; vLLM's return_token_ids."""

import json
import math
import unittest

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=True)

import httpx  # noqa: E402  (from the virtual environment, with openai)
import openai  # noqa: E402

PROMPT = "Once upon a time"
MODEL = None
SERVER = None
CLIENT = None
# The sampling settings both sides use for the greedy comparisons (iwb run's defaults, said out loud).
GREEDY = {"temperature": 0, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0, "repeat_last_n": 64}


def raw_json(response):
    """The JSON body of a with_raw_response call (to see fields the client's types drop)."""
    return json.loads(response.http_response.text)


class TestServeOpenAI(unittest.TestCase):
    def test_models_describe_the_model(self):
        models = CLIENT.models.list()
        self.assertEqual(len(models.data), 1)
        m = models.data[0]
        self.assertEqual(m.id, "aidreams")
        meta = m.model_extra["meta"]
        self.assertEqual(meta["n_ctx"], 128)
        self.assertEqual(meta["n_vocab"], 512)
        self.assertGreater(meta["n_params"], 200_000)
        self.assertGreater(meta["size"], 0)

    def test_chat_greedy_equals_iwb_run(self):
        raw = CLIENT.chat.completions.with_raw_response.create(
            model="aidreams", messages=[{"role": "user", "content": PROMPT}], max_tokens=40,
            temperature=0, top_p=0.95, extra_body={k: v for k, v in GREEDY.items() if k not in ("temperature", "top_p")})
        r = raw.parse()
        text = r.choices[0].message.content
        run = fx.run_iwb("run", "-m", MODEL, "--chat", "-p", PROMPT, "-n", "40", "--temp", "0", "--top-k", "40",
                         "--top-p", "0.95", "--min-p", "0.05", "--repeat-penalty", "1.0", "-t", "2")
        self.assertEqual(run, text + "\n")
        self.assertTrue(len(text) > 10, text)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertEqual(r.object, "chat.completion")
        self.assertTrue(r.id.startswith("chatcmpl-"))
        # usage: the rendered prompt's tokens and what was generated.
        prompt_tokens = len(json.loads(SERVER.post("/tokenize", {"content": f"User: {PROMPT}\nAssistant:",
                                                                 "add_special": True})[1])["tokens"])
        self.assertEqual(r.usage.prompt_tokens, prompt_tokens)
        self.assertGreater(r.usage.completion_tokens, 0)
        self.assertLessEqual(r.usage.completion_tokens, 40)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
        timings = raw_json(raw)["timings"]
        for key in ("prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
                    "predicted_per_second", "cache_n"):
            self.assertIn(key, timings)
        self.assertEqual(timings["predicted_n"], r.usage.completion_tokens)
        self.assertEqual(timings["prompt_n"] + timings["cache_n"], r.usage.prompt_tokens)

    def test_completion_greedy_equals_iwb_run(self):
        r = CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=50, temperature=0, top_p=0.95,
                                      extra_body={"top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0})
        run = fx.run_iwb("run", "-m", MODEL, "-p", PROMPT, "-n", "50", "--temp", "0", "-t", "2")
        self.assertEqual(run, r.choices[0].text + "\n")
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 50)
        self.assertEqual(r.object, "text_completion")

    def test_streamed_chat_matches_plain_chat(self):
        kwargs = dict(model="aidreams", messages=[{"role": "system", "content": "Tell a story."},
                                                  {"role": "user", "content": "A cat"}],
                      max_tokens=30, temperature=0)
        plain = CLIENT.chat.completions.create(**kwargs)
        chunks = list(CLIENT.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, plain.choices[0].message.content)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(finishes, [plain.choices[0].finish_reason])
        # include_usage: a last chunk without choices carries the usage.
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, plain.usage.completion_tokens)
        self.assertEqual(chunks[-1].usage.prompt_tokens, plain.usage.prompt_tokens)
        for c in chunks[:-1]:
            self.assertIsNone(c.usage)
        finish_chunk = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
        self.assertEqual(finish_chunk.model_extra["timings"]["predicted_n"], plain.usage.completion_tokens)

    def test_streamed_completion(self):
        plain = CLIENT.completions.create(model="aidreams", prompt="The sun", max_tokens=25, temperature=0)
        chunks = list(CLIENT.completions.create(model="aidreams", prompt="The sun", max_tokens=25, temperature=0,
                                                stream=True))
        self.assertEqual("".join(c.choices[0].text for c in chunks), plain.choices[0].text)
        self.assertEqual(chunks[-1].choices[0].finish_reason, plain.choices[0].finish_reason)

    def test_stop_strings_end_the_text_before_them(self):
        full = CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=60, temperature=0).choices[0].text
        words = full.split()
        stop = " " + words[len(words) // 2]
        expected = full[:full.index(stop)]
        for stream in (False, True):
            for stops in (stop, [stop, "zzzz"]):
                if stream:
                    chunks = list(CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=60,
                                                            temperature=0, stop=stops, stream=True))
                    text = "".join(c.choices[0].text for c in chunks)
                    reason = chunks[-1].choices[0].finish_reason
                else:
                    r = CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=60, temperature=0,
                                                  stop=stops)
                    text, reason = r.choices[0].text, r.choices[0].finish_reason
                self.assertEqual(text, expected)
                self.assertEqual(reason, "stop")

    def test_n_choices_with_a_seed(self):
        kwargs = dict(model="aidreams", messages=[{"role": "user", "content": PROMPT}], max_tokens=24,
                      temperature=1.0, n=4, seed=1234)
        a = CLIENT.chat.completions.create(**kwargs)
        b = CLIENT.chat.completions.create(**kwargs)
        self.assertEqual([c.index for c in a.choices], [0, 1, 2, 3])
        texts = [c.message.content for c in a.choices]
        self.assertEqual(texts, [c.message.content for c in b.choices])  # same seed, same choices
        self.assertGreater(len(set(texts)), 1, texts)  # each choice has its own seed
        self.assertGreaterEqual(a.usage.completion_tokens, 4)
        self.assertLessEqual(a.usage.completion_tokens, 4 * 24)
        # Prompt tokens count once however many choices share the prompt.
        one = CLIENT.chat.completions.create(**{**kwargs, "n": 1})
        self.assertEqual(a.usage.prompt_tokens, one.usage.prompt_tokens)
        self.assertEqual(one.choices[0].message.content, texts[0])
        # Streamed: every index has its role, its text and one finish.
        finishes = {}
        streamed = {}
        for c in CLIENT.chat.completions.create(stream=True, **kwargs):
            for ch in c.choices:
                streamed[ch.index] = streamed.get(ch.index, "") + (ch.delta.content or "")
                if ch.finish_reason:
                    self.assertNotIn(ch.index, finishes)
                    finishes[ch.index] = ch.finish_reason
        self.assertEqual(sorted(finishes), [0, 1, 2, 3])
        self.assertEqual([streamed[i] for i in range(4)], texts)

    def test_logprobs(self):
        r = CLIENT.chat.completions.create(model="aidreams", messages=[{"role": "user", "content": PROMPT}],
                                           max_tokens=20, temperature=0, logprobs=True, top_logprobs=3,
                                           extra_body={"repeat_penalty": 1.0})
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), r.usage.completion_tokens)
        joined = "".join(t.token for t in content)
        self.assertTrue(joined.startswith(r.choices[0].message.content) or
                        r.choices[0].message.content.startswith(joined.rstrip()), (joined, r.choices[0].message.content))
        for t in content:
            self.assertLessEqual(t.logprob, 0.0)
            self.assertEqual(len(t.top_logprobs), 3)
            tops = [x.logprob for x in t.top_logprobs]
            self.assertEqual(tops, sorted(tops, reverse=True))
            self.assertLessEqual(sum(math.exp(x) for x in tops), 1.0 + 1e-4)
            # Greedy without penalties: the chosen token is the most likely one.
            self.assertEqual(t.token, t.top_logprobs[0].token)
            self.assertAlmostEqual(t.logprob, t.top_logprobs[0].logprob, places=5)
            self.assertEqual(bytes(t.bytes).decode("utf-8", "replace"), t.token)
        # Streamed: each chunk's logprobs are its token's.
        streamed = []
        for c in CLIENT.chat.completions.create(model="aidreams", messages=[{"role": "user", "content": PROMPT}],
                                                max_tokens=20, temperature=0, logprobs=True, top_logprobs=3,
                                                stream=True, extra_body={"repeat_penalty": 1.0}):
            if c.choices and c.choices[0].logprobs:
                streamed += c.choices[0].logprobs.content
        self.assertEqual([(t.token, round(t.logprob, 5)) for t in streamed],
                         [(t.token, round(t.logprob, 5)) for t in content])
        # Text completions: the legacy shape.
        c = CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=10, temperature=0, logprobs=2,
                                      extra_body={"repeat_penalty": 1.0})
        lp = c.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 10)
        self.assertEqual(len(lp.token_logprobs), 10)
        self.assertEqual(len(lp.top_logprobs[0]), 2)
        self.assertEqual(lp.text_offset[0], 0)
        self.assertEqual("".join(lp.tokens), c.choices[0].text)

    def test_max_tokens_is_clamped_to_the_context(self):
        r = CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=1_000_000_000, temperature=0,
                                      extra_body={"repeat_penalty": 1.0})
        prompt_tokens = r.usage.prompt_tokens
        self.assertLessEqual(prompt_tokens + r.usage.completion_tokens, 128)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))

    def test_ignore_eos_generates_max_tokens(self):
        # A seeded sampled text that ends with EOS before 100 tokens; with ignore_eos (vLLM's and
        # llama-server's extension, which load generators send) the same request generates
        # through it to exactly max_tokens.
        def complete(seed, **extra):
            return CLIENT.completions.create(model="aidreams", prompt="The end.", max_tokens=100, temperature=1.0,
                                             seed=seed, extra_body=extra)
        seed = next((s for s in range(64) if complete(s).choices[0].finish_reason == "stop"), None)
        self.assertIsNotNone(seed, "no seed of 64 ended with EOS within 100 tokens")
        self.assertLess(complete(seed).usage.completion_tokens, 100)
        forced = complete(seed, ignore_eos=True)
        self.assertEqual(forced.usage.completion_tokens, 100)
        self.assertEqual(forced.choices[0].finish_reason, "length")

    def test_return_token_ids(self):
        # vLLM's return_token_ids: the prompt's ids and each choice's generated ones, exactly the
        # tokens the engine computed (a greedy continuation from prompt + the first ten generated
        # ids generates the next ones), in plain and streamed responses; absent unless asked.
        ids = {"return_token_ids": True}
        raw = CLIENT.completions.with_raw_response.create(model="aidreams", prompt=PROMPT, max_tokens=30,
                                                          temperature=0, extra_body=ids)
        body = raw_json(raw)
        choice = body["choices"][0]
        self.assertEqual(len(choice["prompt_token_ids"]), body["usage"]["prompt_tokens"])
        self.assertEqual(len(choice["token_ids"]), body["usage"]["completion_tokens"])
        detokenized = json.loads(SERVER.post("/detokenize", {"tokens": choice["token_ids"]})[1])["content"]
        self.assertEqual(detokenized.strip(), choice["text"].strip())
        cont = raw_json(CLIENT.completions.with_raw_response.create(
            model="aidreams", prompt=choice["prompt_token_ids"] + choice["token_ids"][:10], max_tokens=5,
            temperature=0, extra_body=ids))
        self.assertEqual(cont["choices"][0]["token_ids"], choice["token_ids"][10:15])
        self.assertGreaterEqual(cont["timings"]["cache_n"], 16)  # the first request's blocks
        chunks = list(CLIENT.completions.create(model="aidreams", prompt=PROMPT, max_tokens=30, temperature=0,
                                                stream=True, extra_body=ids))
        streamed = [t for c in chunks for t in c.choices[0].model_extra.get("token_ids", [])]
        self.assertEqual(streamed, choice["token_ids"])
        self.assertEqual(chunks[0].choices[0].model_extra["prompt_token_ids"], choice["prompt_token_ids"])
        self.assertNotIn("prompt_token_ids", chunks[1].choices[0].model_extra)

        messages = [{"role": "user", "content": PROMPT}]
        chat = raw_json(CLIENT.chat.completions.with_raw_response.create(model="aidreams", messages=messages,
                                                                         max_tokens=30, temperature=0,
                                                                         extra_body=ids))
        self.assertEqual(len(chat["prompt_token_ids"]), chat["usage"]["prompt_tokens"])
        self.assertEqual(len(chat["choices"][0]["token_ids"]), chat["usage"]["completion_tokens"])
        chunks = list(CLIENT.chat.completions.create(model="aidreams", messages=messages, max_tokens=30,
                                                     temperature=0, stream=True, extra_body=ids))
        self.assertEqual(chunks[0].model_extra["prompt_token_ids"], chat["prompt_token_ids"])
        self.assertTrue(all("prompt_token_ids" not in c.model_extra for c in chunks[1:]))
        streamed = [t for c in chunks if c.choices for t in c.choices[0].model_extra.get("token_ids", [])]
        self.assertEqual(streamed, chat["choices"][0]["token_ids"])

        plain = raw_json(CLIENT.completions.with_raw_response.create(model="aidreams", prompt=PROMPT, max_tokens=5,
                                                                     temperature=0))
        self.assertNotIn("token_ids", plain["choices"][0])
        self.assertNotIn("prompt_token_ids", plain["choices"][0])

    def test_errors_have_the_openai_shape(self):
        with self.assertRaises(openai.BadRequestError) as e:
            CLIENT.chat.completions.create(model="aidreams", messages=[{"role": "wizard", "content": "hi"}])
        self.assertEqual(e.exception.status_code, 400)
        body = e.exception.body
        self.assertIn("wizard", body["message"])
        self.assertEqual(body["param"], "messages[0].role")
        self.assertEqual(body["type"], "invalid_request_error")
        with self.assertRaises(openai.BadRequestError) as e:
            CLIENT.chat.completions.create(model="aidreams", messages=[{"role": "user", "content": "hi"}], n=1000)
        self.assertEqual(e.exception.body["param"], "n")
        with self.assertRaises(openai.BadRequestError) as e:
            CLIENT.completions.create(model="aidreams", prompt="word " * 400)
        self.assertEqual(e.exception.body["code"], "context_length_exceeded")
        self.assertIn("context holds 128", e.exception.body["message"])
        with self.assertRaises(openai.NotFoundError) as e:
            CLIENT.get("/v1/nothing", cast_to=httpx.Response)
        self.assertEqual(e.exception.body["type"], "not_found_error")
        status, body, _ = SERVER.post("/v1/chat/completions", b"{not json")
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["error"]["code"], "invalid_json")
        # The server is still fine.
        self.assertEqual(SERVER.get("/health")[0], 200)

    def test_tokenize_and_detokenize(self):
        status, body, _ = SERVER.post("/tokenize", {"content": PROMPT, "with_pieces": True})
        self.assertEqual(status, 200)
        pieces = json.loads(body)["tokens"]
        self.assertEqual("".join(p["piece"] for p in pieces), " " + PROMPT)
        ids = [p["id"] for p in pieces]
        status, body, _ = SERVER.post("/detokenize", {"tokens": ids})
        self.assertEqual(json.loads(body)["content"].strip(), PROMPT)
        status, body, _ = SERVER.post("/detokenize", {"tokens": [1, 99999]})
        self.assertEqual(status, 400)
        status, body, _ = SERVER.post("/tokenize", {"content": 5})
        self.assertEqual(status, 400)


class TestServeLimitsAndKeys(unittest.TestCase):
    def test_api_key_and_full_queue(self):
        with fx.Server(MODEL, "--api-key", "sekrit", "--max-queue", "2") as server:
            good = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sekrit", max_retries=0)
            bad = openai.OpenAI(base_url=server.base_url + "/v1", api_key="wrong", max_retries=0)
            with self.assertRaises(openai.AuthenticationError) as e:
                bad.models.list()
            self.assertEqual(e.exception.body["code"], "invalid_api_key")
            self.assertEqual(server.get("/health")[0], 200)  # health needs no key
            self.assertEqual(server.get("/metrics")[0], 401)
            self.assertEqual(good.models.list().data[0].id, "aidreams")
            # Three choices when two requests may be in flight: 503 with Retry-After.
            status, body, headers = server.post("/v1/completions", {"prompt": "Hi", "n": 3, "max_tokens": 4},
                                                headers={"Authorization": "Bearer sekrit"})
            self.assertEqual(status, 503)
            self.assertEqual(headers.get("Retry-After"), "1")
            self.assertEqual(json.loads(body)["error"]["type"], "server_busy")
            r = good.completions.create(model="aidreams", prompt="Hi", n=2, max_tokens=4)
            self.assertEqual(len(r.choices), 2)
            self.assertEqual(server.stop(), 0)

    def test_usage_errors(self):
        import subprocess
        def run(*args):
            return subprocess.run([ARGS.iwb, "serve"] + list(args), capture_output=True, text=True, timeout=60)
        r = run()
        self.assertEqual(r.returncode, 2)
        self.assertIn("no model given", r.stderr)
        self.assertEqual(run("-m", MODEL, "--port", "70000").returncode, 2)
        self.assertEqual(run("-m", MODEL, "--frobnicate").returncode, 2)
        self.assertEqual(run("--help").returncode, 0)
        r = run("-m", MODEL + ".missing", "--port", "0")
        self.assertEqual(r.returncode, 1)
        self.assertIn(".missing", r.stderr)
        # The port of the running server is taken: a second server says so.
        r = run("-m", MODEL, "--port", str(SERVER.port))
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot listen", r.stderr)

    def test_non_loopback_without_key_warns(self):
        with fx.Server(MODEL, "--host", "0.0.0.0") as server:
            self.assertTrue(any("warning" in l and "--api-key" in l for l in server.lines), server.log())


if __name__ == "__main__":
    fx.serve_module(__name__, fx.aidreams_gguf(), [], REST)
