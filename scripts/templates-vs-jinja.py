#!/usr/bin/env python3
"""Chat prompts of `iwb serve` against Jinja templates rendered by jinja2 as Hugging Face renders
them (tojson with the keys in order and non-ASCII as it is, trim_blocks, lstrip_blocks):
    scripts/templates-vs-jinja.py [--plain] [--bos TEXT --eos TEXT] [--kwargs JSON] IWB MODEL.gguf TEMPLATE.jinja...
serves MODEL with each template as --chat-template (its family recognised, its default system
text and tool example read from it) and compares POST /apply-template with jinja2's rendering
for conversations with tools, tool calls and results. Needs jinja2 (pip install jinja2).
--plain: the conversations without tools (template_cases.PLAIN_CASES), for families with no tool
format here. --bos/--eos: the served model's BOS and EOS texts, which jinja2 is given as
bos_token and eos_token (default <s> and </s>). --kwargs: template variables (e.g.
'{"enable_thinking": false}'), given to jinja2 and sent as chat_template_kwargs. --mutable: jinja2's
SandboxedEnvironment instead of the immutable one, for templates that change lists (Kimi K2
Instruct's and Thinking's append and pop call ids, which Hugging Face's immutable sandbox refuses
and llama.cpp's Jinja engine runs). Templates: llama.cpp's models/templates/ (docs/tool-calling.md). Gemma 4's
template as its GGUFs carry it gets llama.cpp's rewrite first (gemma4_messages) and the
conversations of template_cases.GEMMA4_CASES too; Qwen3.5's template those of
template_cases.QWEN35_CASES. Exit status 1 when any differs."""
import datetime
import difflib
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from template_cases import CASES, GEMMA4_CASES, PLAIN_CASES, QWEN35_CASES  # noqa: E402  (scripts/, next to this file)

ARGS = sys.argv[1:]
BOS, EOS = "<s>", "</s>"
KWARGS = {}
ENVIRONMENT = ImmutableSandboxedEnvironment
while ARGS and ARGS[0].startswith("--"):
    if ARGS[0] == "--mutable":
        ENVIRONMENT, ARGS = SandboxedEnvironment, ARGS[1:]
    elif ARGS[0] == "--plain":
        CASES, ARGS = PLAIN_CASES, ARGS[1:]
    elif ARGS[0] == "--kwargs" and len(ARGS) > 1:
        KWARGS, ARGS = json.loads(ARGS[1]), ARGS[2:]
    elif ARGS[0] in ("--bos", "--eos") and len(ARGS) > 1:
        BOS, EOS = (ARGS[1], EOS) if ARGS[0] == "--bos" else (BOS, ARGS[1])
        ARGS = ARGS[2:]
    else:
        sys.exit("unknown option " + ARGS[0])
IWB, MODEL, TEMPLATES = ARGS[0], ARGS[1], ARGS[2:]


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(m):
    raise Exception(m)


env = ENVIRONMENT(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: datetime.datetime.now().strftime(f)


def args_obj(msgs):  # templates get arguments as objects (vLLM and llama.cpp pass them so)
    out = []
    for m in msgs:
        m = json.loads(json.dumps(m))
        for c in m.get("tool_calls", []) or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        if m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


def is_gemma4_gguf_template(text):
    """Gemma 4's template as its GGUFs carry it, which llama.cpp rewrites the messages for (its
    later template, with "OpenAI Chat Completions" handling, takes role "tool" messages itself)."""
    return "'<|tool_call>call:'" in text and "{#- OpenAI Chat Completions:" not in text


def is_qwen35_template(text):
    """Qwen3.5's template (its tools listed as JSON after "following functions:", calls as tags)."""
    return "You have access to the following functions:\\n\\n<tools>" in text and "<parameter=" in text


def gemma4_messages(msgs):
    """llama.cpp's convert_tool_responses_gemma4 (common/parsers/gemma4.cpp): an assistant message
    with calls, the tool results after it (as tool_responses: each named after its call, its text
    read as JSON where it is JSON) and a following answer become one message."""
    out, i = [], 0
    while i < len(msgs):
        m = msgs[i]
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            out.append(m)
            i += 1
            continue
        turn = {"role": "assistant", "tool_calls": m["tool_calls"]}
        if isinstance(m.get("reasoning_content"), str):
            turn["reasoning_content"] = m["reasoning_content"]
        responses = []
        i += 1
        while i < len(msgs) and msgs[i].get("role") == "tool":
            content = msgs[i].get("content")
            try:
                response = json.loads(content)
            except (TypeError, ValueError):
                response = content
            k = len(responses)
            name = m["tool_calls"][k]["function"]["name"] if k < len(m["tool_calls"]) else ""
            responses.append({"name": name or msgs[i].get("tool_call_id", ""), "response": response})
            i += 1
        if responses:
            turn["tool_responses"] = responses
        if i < len(msgs) and msgs[i].get("role") == "assistant" and not msgs[i].get("tool_calls") \
                and msgs[i].get("content"):
            turn["content"] = msgs[i]["content"]
            i += 1
        out.append(turn)
    return out


def post(port, path, body):
    r = urllib.request.Request(f"http://localhost:{port}{path}", data=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
    try:
        return json.loads(urllib.request.urlopen(r).read())
    except urllib.error.HTTPError as e:
        return {"prompt": "HTTP %d %s" % (e.code, e.read()[:200])}


class Server:
    """`iwb serve` of MODEL with a template, on a free port read from its "listening on" line."""

    def __init__(self, text):
        self.proc = subprocess.Popen([IWB, "serve", "-m", MODEL, "--port", "0", "-t", "1", "--chat-template", text],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, errors="replace")
        self.port = None
        found = threading.Event()

        def read():
            for line in self.proc.stderr:
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(60):
            self.stop()
            sys.exit("iwb serve did not start")
        deadline = time.time() + 60
        while True:  # healthy once the model is loaded
            try:
                if urllib.request.urlopen(f"http://localhost:{self.port}/health").status == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.time() > deadline:
                self.stop()
                sys.exit("iwb serve never became healthy")
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


ok = True
for name in TEMPLATES:
    text = open(name).read()
    tmpl = env.from_string(text)
    is_gemma4 = is_gemma4_gguf_template(text)
    own_cases = GEMMA4_CASES if is_gemma4 else QWEN35_CASES if is_qwen35_template(text) else []
    server = Server(text)
    try:
        for i, c in enumerate(CASES + (own_cases if CASES is not PLAIN_CASES else [])):
            try:
                messages = args_obj(c["messages"])
                # date_string as llama.cpp passes it (Llama 3.1+ templates write it).
                ref = tmpl.render(messages=gemma4_messages(messages) if is_gemma4 else messages, tools=c.get("tools"),
                                  add_generation_prompt=True, bos_token=BOS, eos_token=EOS,
                                  date_string=datetime.datetime.now().strftime("%d %b %Y"), **KWARGS)
                if is_gemma4 and ref.endswith("<turn|>\n"):  # llama.cpp opens the model's turn after such a prompt
                    ref += "<|turn>model\n"
            except Exception as e:  # the template refuses it (raise_exception): so must we
                ref = "HTTP 400 (the template: %s)" % e
            ours = post(server.port, "/apply-template", dict(c, chat_template_kwargs=KWARGS) if KWARGS else c)["prompt"]
            if ref.startswith("HTTP 400") and ours.startswith("HTTP 400"):
                print(name, i, "both refuse:", ours[:150])
                continue
            print(name, i, "identical" if ref == ours else "DIFFERENT")
            if ref != ours:
                ok = False
                for l in list(difflib.unified_diff(ref.splitlines(), ours.splitlines(), "jinja2", "iwb", lineterm="", n=1))[:14]: print("   ", l[:160])
    finally:
        server.stop()
sys.exit(0 if ok else 1)
