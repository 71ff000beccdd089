#!/usr/bin/env python3
"""Two chat turns against a running `iwb serve` (or any server with vLLM's return_token_ids), to
measure how much of a next turn the prefix cache saves: turn 1 is a prompt of random token ids
with a greedy reply generated through end-of-generation tokens; turn 2 is turn 1's prompt ids,
the reply's ids and some new tokens, sent as ids. Prints each turn's llama-server `timings`
(prompt_n computed, cache_n taken from the cache, prompt_ms).

    scripts/serve-chat-turns.py [--port 8080] [--prompt-tokens 1000] [--reply-tokens 128]
                                [--new-tokens 48] [--seed 7]
"""
import argparse
import json
import random
import urllib.request


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--reply-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    def post(body):
        req = urllib.request.Request(f"http://127.0.0.1:{args.port}/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=3600) as r:
            return json.load(r)

    def show(name, response, num_prompt):
        t = response["timings"]
        print(f"{name}: {num_prompt} prompt tokens: computed {t['prompt_n']}, from cache {t['cache_n']}, "
              f"prompt {t['prompt_ms'] / 1e3:.1f} s; generated {t['predicted_n']}")

    # Ids from 300 up: past the special tokens of the vocabularies we serve.
    turn1 = [rng.randrange(300, 30000) for _ in range(args.prompt_tokens)]
    r1 = post({"prompt": turn1, "max_tokens": args.reply_tokens, "temperature": 0, "ignore_eos": True,
               "return_token_ids": True})
    show("turn 1", r1, len(turn1))
    choice = r1["choices"][0]
    turn2 = choice["prompt_token_ids"] + choice["token_ids"] + [rng.randrange(300, 30000)
                                                                for _ in range(args.new_tokens)]
    show("turn 2", post({"prompt": turn2, "max_tokens": 8, "temperature": 0}), len(turn2))


if __name__ == "__main__":
    main()
