"""Chat templates rendered by `iwb serve` (POST /apply-template) against jinja2's rendering of the
same Jinja text, byte for byte, through scripts/templates-vs-jinja.py: Gemma 4's template (as its
GGUFs carry it) and Qwen3.5's (llama.cpp's copy), both in tests/serve/templates/, and Qwen3.5's
as its releases that think only when asked write their generation prompt (made here from it),
with template_cases' conversations (tools, calls, results, reasoning) and each one's own,
thinking as the template's default, on, and off as a request says. The model is the shared
aidreams one (its BOS "<s>" as bos_token); jinja2 comes from the build's virtual environment
(tests/serve/requirements.txt)."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture  # noqa: E402

ARGS, _ = serve_fixture.parse_args(needs_pyenv=True)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "templates-vs-jinja.py")
TEMPLATE_DIR = os.path.join(ROOT, "tests", "serve", "templates")
TEMPLATES = [os.path.join(TEMPLATE_DIR, "google-gemma-4.jinja"), os.path.join(TEMPLATE_DIR, "Qwen3.5-4B.jinja")]

# Qwen3.5's releases whose generation prompt thinks only when enable_thinking is true: the same
# template with its two branches swapped.
THINKS_UNLESS_OFF = ("{%- if enable_thinking is defined and enable_thinking is false %}\n"
                     "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- else %}\n        {{- '<think>\\n' }}")
THINKS_WHEN_ON = ("{%- if enable_thinking is defined and enable_thinking is true %}\n"
                  "        {{- '<think>\\n' }}\n    {%- else %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}")
qwen35 = open(TEMPLATES[1]).read()
if THINKS_UNLESS_OFF not in qwen35:
    sys.exit("FAIL: Qwen3.5's generation prompt is not where this test looks for it")
TEMPLATES.append(os.path.join(ARGS.work, "Qwen3.5-thinking-opt-in.jinja"))
with open(TEMPLATES[-1], "w") as f:
    f.write(qwen35.replace(THINKS_UNLESS_OFF, THINKS_WHEN_ON))

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
