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
and llama.cpp's Jinja engine runs). Templates: llama.cpp's models/templates/ (docs/tool-calling.md). Exit status 1 when
any differs."""
import datetime
import difflib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from template_cases import CASES, PLAIN_CASES  # noqa: E402  (scripts/, next to this file)

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


def post(port, path, body):
    r = urllib.request.Request(f"http://localhost:{port}{path}", data=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
    try:
        return json.loads(urllib.request.urlopen(r).read())
    except urllib.error.HTTPError as e:
        return {"prompt": "HTTP %d %s" % (e.code, e.read()[:200])}


ok = True
for name in TEMPLATES:
    text = open(name).read()
    tmpl = env.from_string(text)
    p = subprocess.Popen([IWB, "serve", "-m", MODEL, "--port", "8383", "-t", "1", "--chat-template", text],
                         stderr=subprocess.DEVNULL)
    time.sleep(2)
    try:
        for i, c in enumerate(CASES):
            try:
                # date_string as llama.cpp passes it (Llama 3.1+ templates write it).
                ref = tmpl.render(messages=args_obj(c["messages"]), tools=c.get("tools"), add_generation_prompt=True,
                                  bos_token=BOS, eos_token=EOS,
                                  date_string=datetime.datetime.now().strftime("%d %b %Y"), **KWARGS)
            except Exception as e:  # the template refuses it (raise_exception): so must we
                ref = "HTTP 400 (the template: %s)" % e
            ours = post(8383, "/apply-template", dict(c, chat_template_kwargs=KWARGS) if KWARGS else c)["prompt"]
            if ref.startswith("HTTP 400") and ours.startswith("HTTP 400"):
                print(name, i, "both refuse:", ours[:150])
                continue
            print(name, i, "identical" if ref == ours else "DIFFERENT")
            if ref != ours:
                ok = False
                for l in list(difflib.unified_diff(ref.splitlines(), ours.splitlines(), "jinja2", "iwb", lineterm="", n=1))[:14]: print("   ", l[:160])
    finally:
        p.terminate()
        p.wait()
sys.exit(0 if ok else 1)
