"""Chat templates rendered by `iwb serve` (POST /apply-template) against jinja2's rendering of the
same Jinja text, byte for byte, through scripts/templates-vs-jinja.py: Gemma 4's template (as its
GGUFs carry it, tests/serve/templates/) with template_cases' conversations (tools, calls, results,
reasoning) and its own, thinking off by default, on, and off as a request says. The model is the
shared aidreams one (its BOS "<s>" as bos_token); jinja2 comes from the build's virtual
environment (tests/serve/requirements.txt)."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture  # noqa: E402

ARGS, _ = serve_fixture.parse_args(needs_pyenv=True)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "templates-vs-jinja.py")
TEMPLATES = [os.path.join(ROOT, "tests", "serve", "templates", "google-gemma-4.jinja")]

model = serve_fixture.aidreams_gguf()
failed = []
for kwargs in ([], ["--kwargs", '{"enable_thinking": true}'], ["--kwargs", '{"enable_thinking": false}']):
    command = [sys.executable, SCRIPT] + kwargs + [ARGS.iwb, model] + TEMPLATES
    print("$", " ".join(command[1:]), flush=True)
    if subprocess.run(command).returncode != 0:
        failed.append(" ".join(kwargs) or "no kwargs")
if failed:
    sys.exit("FAIL: iwb's rendering differs from jinja2's (" + "; ".join(failed) + ")")
print("all identical")
