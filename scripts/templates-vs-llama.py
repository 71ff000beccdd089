#!/usr/bin/env python3
"""Chat prompts of `iwb serve` against llama-server's (--jinja): both servers' POST /apply-template
for the same conversations (tools, calls, tool results, none), compared byte for byte.
    scripts/templates-vs-llama.py IWB_PORT LLAMA_SERVER_PORT
with both serving the same GGUF file (docs/tool-calling.md). Exit status 1 when any differs."""
import json
import sys
import urllib.error
import urllib.request

from template_cases import CASES  # noqa: E402  (scripts/, next to this file)


def post(port, path, body):
    """The prompt text, or None when the server refuses the conversation (as a template may)."""
    r = urllib.request.Request(f"http://localhost:{port}{path}", data=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
    try:
        return json.loads(urllib.request.urlopen(r).read())["prompt"]
    except urllib.error.HTTPError:
        return None


ok = True
for i, c in enumerate(CASES):
    a = post(int(sys.argv[1]), "/apply-template", c)
    b = post(int(sys.argv[2]), "/apply-template", c)
    print(i, "both refuse" if a is None and b is None else "identical" if a == b else "DIFFERENT")
    if a != b:
        ok = False
        print(repr(a))
        print(repr(b))
sys.exit(0 if ok else 1)
