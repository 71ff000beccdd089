#!/usr/bin/env python3
"""Chat prompts of `iwb serve` against llama-server's (--jinja): both servers' POST /apply-template
for the same conversations (tools, calls, tool results, none), compared byte for byte.
    scripts/templates-vs-llama.py IWB_PORT LLAMA_SERVER_PORT
with both serving the same GGUF file (docs/tool-calling.md). Exit status 1 when any differs."""
import json
import sys
import urllib.request


def post(port, path, body):
    r = urllib.request.Request(f"http://localhost:{port}{path}", data=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(r).read())


WEATHER = {"type":"function","function":{"name":"get_weather","description":"Weather in a city, °C","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}}}
NOW = {"type":"function","function":{"name":"now","description":"The time","parameters":{"type":"object","properties":{}}}}
cases = [
 {"messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":[WEATHER,NOW]},
 {"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"tools":[NOW]},
 {"messages":[{"role":"user","content":"Weather in Paris and the time?"},
   {"role":"assistant","content":None,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"c\"}"}},{"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]},
   {"role":"tool","tool_call_id":"call_1","content":"{\"temp\": 21}"},{"role":"tool","tool_call_id":"call_2","content":"12:00"},
   {"role":"assistant","content":"21 °C at noon."},{"role":"user","content":"Thanks"}],"tools":[WEATHER,NOW]},
 {"messages":[{"role":"user","content":"Hi"}]},
 {"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c","type":"function","function":{"name":"now","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"noon"}]},
]
ok = True
for i, c in enumerate(cases):
    a = post(int(sys.argv[1]), '/apply-template', c)['prompt']
    b = post(int(sys.argv[2]), '/apply-template', c)['prompt']
    print(i, 'identical' if a == b else 'DIFFERENT')
    if a != b:
        ok = False
        print(repr(a))
        print(repr(b))
sys.exit(0 if ok else 1)
