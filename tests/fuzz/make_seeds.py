#!/usr/bin/env python3
"""Writes the small seed inputs of every fuzz target into tests/fuzz/corpus/<target>/seed-*.
The seeds are synthetic (tiny valid GGUF files of four tokenizer kinds, an imatrix, a
llama2.c header and tokenizer, request bodies, templates): the shared model files are never
copied into the repository; scripts/fuzz.sh adds them to its working corpus when it runs.
Run again after changing it; the files are committed so that CTest can replay them."""

import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# --- GGUF (version 3) ----------------------------------------------------------------------
U32, I32, F32, BOOL, STRING, ARRAY, U64 = 4, 5, 6, 7, 8, 9, 10


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind, value):
    if kind == U32:
        return struct.pack("<I", value)
    if kind == I32:
        return struct.pack("<i", value)
    if kind == F32:
        return struct.pack("<f", value)
    if kind == BOOL:
        return struct.pack("<B", 1 if value else 0)
    if kind == STRING:
        return gguf_string(value)
    if kind == U64:
        return struct.pack("<Q", value)
    raise ValueError(kind)


def gguf_file(kvs, tensors):
    """kvs: [(key, kind, value)] where an array value is (ARRAY, elem_kind, [values]);
    tensors: [(name, dims, values as float32)]"""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, kind, value in kvs:
        out += gguf_string(key) + struct.pack("<I", kind)
        if kind == ARRAY:
            elem_kind, items = value
            out += struct.pack("<IQ", elem_kind, len(items))
            out += b"".join(gguf_value(elem_kind, v) for v in items)
        else:
            out += gguf_value(kind, value)
    data, offset = b"", 0
    for name, dims, values in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 0, offset)  # type F32
        blob = struct.pack(f"<{len(values)}f", *values)
        blob += b"\0" * (-len(blob) % 32)
        data += blob
        offset += len(blob)
    out += b"\0" * (-len(out) % 32)
    return out + data


def llama_keys(arch, n_vocab):
    return [("general.architecture", STRING, arch),
            (f"{arch}.context_length", U32, 64),
            (f"{arch}.embedding_length", U32, 8),
            (f"{arch}.block_count", U32, 1),
            (f"{arch}.feed_forward_length", U32, 16),
            (f"{arch}.attention.head_count", U32, 2),
            (f"{arch}.attention.head_count_kv", U32, 1),
            (f"{arch}.attention.layer_norm_rms_epsilon", F32, 1e-5),
            (f"{arch}.rope.freq_base", F32, 10000.0),
            (f"{arch}.vocab_size", U32, n_vocab)]


def tiny_tensors(n_vocab):
    return [("token_embd.weight", [8, n_vocab], [0.01 * i for i in range(8 * n_vocab)]),
            ("output_norm.weight", [8], [1.0] * 8)]


def spm_gguf():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + \
             ["▁", "▁h", "▁hello", "▁world", "e", "l", "o", "▁w", "or", "ld", "▁1", "2"]
    types = [2, 3, 3] + [6] * 256 + [1] * 12
    kvs = llama_keys("llama", len(tokens)) + [
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.scores", ARRAY, (F32, [-float(i) for i in range(len(tokens))])),
        ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.chat_template", STRING, "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}")]
    return gguf_file(kvs, tiny_tensors(len(tokens)))


def bpe_gguf():
    byte_chars = [chr(c) for c in range(33, 127)] + ["Ġ", "Ċ"]
    tokens = byte_chars + ["Ġh", "Ġhe", "Ġhello", "Ġw", "Ġworld", "<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    types = [1] * (len(tokens) - 3) + [3, 3, 3]
    kvs = llama_keys("qwen2", len(tokens)) + [
        ("tokenizer.ggml.model", STRING, "gpt2"),
        ("tokenizer.ggml.pre", STRING, "qwen2"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        ("tokenizer.ggml.merges", ARRAY, (STRING, ["Ġ h", "Ġh e", "Ġ w"])),
        ("tokenizer.ggml.eos_token_id", U32, len(tokens) - 1),
        ("tokenizer.chat_template", STRING,
         "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}")]
    return gguf_file(kvs, tiny_tensors(len(tokens)))


def gemma4_vocab_gguf():
    # Gemma 4's tokenizer (no tensors): BPE over raw UTF-8 with ▁ for spaces, <0xNN> byte
    # fallback, a run of newlines that no merge builds, turn markers and a user-defined token.
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)] + \
             ["▁", "h", "e", "l", "o", "\n", "\n\n", "\n\n\n", "he", "ll", "hell", "hello", "▁hello",
              "<|turn>", "<turn|>", "<|tool_response>", '<|"|>']
    types = [3] * 4 + [6] * 256 + [1] * 13 + [3, 3, 4, 4]
    kvs = [("general.architecture", STRING, "gemma4"),
           ("tokenizer.ggml.model", STRING, "gemma4"),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
           ("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * len(tokens))),
           ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
           ("tokenizer.ggml.merges", ARRAY, (STRING, ["h e", "l l", "he ll", "hell o", "▁ hello", "\n \n"])),
           ("tokenizer.ggml.bos_token_id", U32, 2), ("tokenizer.ggml.eos_token_id", U32, 1),
           ("tokenizer.ggml.unknown_token_id", U32, 3), ("tokenizer.ggml.padding_token_id", U32, 0),
           ("tokenizer.ggml.add_bos_token", BOOL, True), ("tokenizer.ggml.add_space_prefix", BOOL, False)]
    return gguf_file(kvs, [])


def wordpiece_gguf():
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "a", "b", "##c", ",", "!"]
    types = [3, 2, 3, 3, 3] + [1] * 8
    kvs = [("general.architecture", STRING, "bert"),
           ("bert.context_length", U32, 64), ("bert.embedding_length", U32, 8), ("bert.block_count", U32, 1),
           ("bert.feed_forward_length", U32, 16), ("bert.attention.head_count", U32, 2),
           ("tokenizer.ggml.model", STRING, "bert"),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
           ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
           ("tokenizer.ggml.unknown_token_id", U32, 1), ("tokenizer.ggml.seperator_token_id", U32, 3),
           ("tokenizer.ggml.cls_token_id", U32, 2), ("tokenizer.ggml.padding_token_id", U32, 0)]
    return gguf_file(kvs, tiny_tensors(len(tokens)))


# --- the other formats -----------------------------------------------------------------------
def imatrix():
    out = struct.pack("<i", 2)
    for name, values in (("blk.0.attn_q.weight", [0.5, 1.0, 2.0, 4.0]), ("output.weight", [1.0] * 3)):
        b = name.encode()
        out += struct.pack("<i", len(b)) + b + struct.pack("<ii", 10, len(values))
        out += struct.pack(f"<{len(values)}f", *values)
    dataset = b"calibration.txt"
    return out + struct.pack("<ii", 10, len(dataset)) + dataset


def llama2c_header(vocab):
    # dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative: separate classifier), seq_len
    return bytes([1]) + struct.pack("<7i", 64, 172, 5, 8, 4, vocab, 512)


def llama2c_tokenizer():
    pieces = ["<unk>", "\n<s>\n", "\n</s>\n"] + [f"<0x{b:02X}>" for b in range(253)] + [" hello", " world", "a"]
    out = struct.pack("<i", max(len(p) for p in pieces))
    for i, p in enumerate(pieces):
        b = p.encode()
        out += struct.pack("<fi", -float(i), len(b)) + b
    # Selector byte 0 with bits 1-2 = 2: the 512-token size; this file has 259, so a size error
    # path, and 3 << 1 (32000) too. Both parse the same bytes.
    return [bytes([2 << 1]) + out, bytes([3 << 1]) + out]


REQUESTS = [
    {"model": "m", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16, "stream": True,
     "stream_options": {"include_usage": True}},
    {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
     "temperature": 0.7, "top_p": 0.9, "seed": 42, "stop": ["\n", "User:"], "n": 2, "logprobs": True,
     "top_logprobs": 3},
    {"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "echo": True, "logprobs": 2},
    {"model": "m", "prompt": [[1, 2, 3], "text"], "max_tokens": 4, "ignore_eos": True, "min_p": 0.05,
     "repeat_penalty": 1.1, "top_k": 40},
    {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]},
    {"model": "m", "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21"}],
     "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "strict": False,
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
     "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": False},
]

TEMPLATES = [
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n'}}{% endfor %}",
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}",
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}",
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}<|assistant|>\n",
    "{{ bos_token }}{% for m in messages %}[INST] <<SYS>>\n{{ m['content'] }}\n<</SYS>>\n\n [/INST]{% endfor %}",
]

TEXTS = ["Hello world", " leading space and  double", "123 4567 89.01", "ünïcödé ☕ 🦙 日本語",
         "<|im_start|>user\nhi<|im_end|>", "can't won't I'M", "\n\n\t tabs\r\n", "a" * 200]


# Structured output: a schema, a 0 byte, then a reply (one that fits, and one cut short).
SCHEMAS = [
    ({}, '[1, "a", {"b": null}]'),
    ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}, "n": {"type": "integer"}},
      "required": ["name"]}, '{"name": "Ann", "n": -12}'),
    ({"$defs": {"t": {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
      "$ref": "#/$defs/t"}, '{"c": [{"c": []}, {}]}'),
    ({"anyOf": [{"enum": ["red", 1, None]}, {"type": "number"}]}, "1.5e-3"),
    ({"type": "object", "additionalProperties": {"type": "boolean"}}, '{\n  "x": true, "y\\u00e9": false}'),
]


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def gpt2_vocabulary(pre, specials):
    # A byte-level BPE vocabulary: the printable bytes, Ġ and Ċ, two merges' results, then the
    # special (control) tokens.
    byte_chars = [chr(c) for c in range(33, 127)] + ["Ġ", "Ċ"]
    tokens = byte_chars + ["Ġh", "Ġhello"] + specials
    types = [1] * (len(byte_chars) + 2) + [3] * len(specials)
    return tokens, [("tokenizer.ggml.model", STRING, "gpt2"),
                    ("tokenizer.ggml.pre", STRING, pre),
                    ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
                    ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
                    ("tokenizer.ggml.merges", ARRAY, (STRING, ["Ġ h", "Ġh e"]))]


def deepseek_routing_keys(a, experts, groups, groups_used):
    # DeepSeek routing as both converters write it: sigmoid, one shared expert, a dense first
    # layer, weights scaled by 2.5 and renormalised, the expert groups.
    return [(f"{a}.expert_count", U32, experts),
            (f"{a}.expert_used_count", U32, 2),
            (f"{a}.expert_feed_forward_length", U32, 8),
            (f"{a}.expert_shared_count", U32, 1),
            (f"{a}.leading_dense_block_count", U32, 1),
            (f"{a}.expert_gating_func", U32, 2),
            (f"{a}.expert_weights_scale", F32, 2.5),
            (f"{a}.expert_weights_norm", BOOL, True),
            (f"{a}.expert_group_count", U32, groups),
            (f"{a}.expert_group_used_count", U32, groups_used)]


def glm_gguf():
    # glm4moe's keys (GLM-4.5: sigmoid routing, a shared expert, a dense first layer, a prediction
    # layer after the trunk, half of each head rotated, one group) and a GLM vocabulary, whose
    # [gMASK] makes <|user|> and <|observation|> end generation.
    tokens, vocabulary = gpt2_vocabulary("glm4", ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>",
                                                  "<|assistant|>", "<|observation|>", "<think>", "</think>"])
    a = "glm4moe"
    kvs = [kv for kv in llama_keys(a, len(tokens)) if kv[0] != f"{a}.block_count"] + [
        (f"{a}.block_count", U32, 3),
        (f"{a}.nextn_predict_layers", U32, 1),
        (f"{a}.attention.key_length", U32, 4),
        (f"{a}.attention.value_length", U32, 4),
        (f"{a}.rope.dimension_count", U32, 2)] + deepseek_routing_keys(a, 4, 1, 1) + vocabulary + [
        ("tokenizer.ggml.eos_token_id", U32, tokens.index("<|endoftext|>")),
        ("tokenizer.chat_template", STRING,
         "[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{% endfor %}"
         "<arg_key>k</arg_key>\n<arg_value>v</arg_value><|observation|>")]
    tensors = tiny_tensors(len(tokens)) + [("blk.0.attn_q_norm.weight", [4], [1.0] * 4)]
    return gguf_file(kvs, tensors)


def deepseek_gguf():
    # deepseek2's keys (DeepSeek V3: latent attention with a query latent, one KV head of latent +
    # roped values, sigmoid routing in groups, YaRN with its log multiplier, shared experts and a
    # dense first layer) and a deepseek-v3 vocabulary.
    tokens, vocabulary = gpt2_vocabulary("deepseek-v3", ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                                                         "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"])
    a = "deepseek2"
    kvs = llama_keys(a, len(tokens)) + [
        (f"{a}.attention.key_length", U32, 6),
        (f"{a}.attention.value_length", U32, 4),
        (f"{a}.attention.key_length_mla", U32, 6),
        (f"{a}.attention.value_length_mla", U32, 4),
        (f"{a}.attention.kv_lora_rank", U32, 4),
        (f"{a}.attention.q_lora_rank", U32, 8),
        (f"{a}.rope.dimension_count", U32, 2),
        (f"{a}.rope.scaling.type", STRING, "yarn"),
        (f"{a}.rope.scaling.factor", F32, 40.0),
        (f"{a}.rope.scaling.original_context_length", U32, 16),
        (f"{a}.rope.scaling.yarn_log_multiplier", F32, 0.1)] + deepseek_routing_keys(a, 8, 4, 2) + vocabulary + [
        ("tokenizer.ggml.eos_token_id", U32, tokens.index("<｜end▁of▁sentence｜>")),
        ("tokenizer.chat_template", STRING,
         "{% for m in messages %}<｜{{ m.role }}｜>{{ m.content }}{% endfor %}"
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁output▁begin｜>")]
    tensors = tiny_tensors(len(tokens)) + [("blk.1.exp_probs_b.bias", [8], [0.0] * 8)]
    return gguf_file(kvs, tensors)


def main():
    write("gguf", "seed-spm", spm_gguf())
    write("gguf", "seed-bpe", bpe_gguf())
    write("gguf", "seed-wordpiece", wordpiece_gguf())
    write("gguf", "seed-gemma4-vocab", gemma4_vocab_gguf())
    write("gguf", "seed-glm4moe", glm_gguf())
    write("gguf", "seed-deepseek2", deepseek_gguf())
    write("imatrix", "seed-imatrix.dat", imatrix())
    write("llama2c", "seed-header-shared", llama2c_header(512))
    write("llama2c", "seed-header-separate", llama2c_header(-512))
    for i, data in enumerate(llama2c_tokenizer()):
        write("llama2c", f"seed-tokenizer-{i}", data)
    for i, body in enumerate(REQUESTS):
        write("openai_request", f"seed-{i}.json", json.dumps(body).encode())
    for i, (schema, reply) in enumerate(SCHEMAS):
        write("json_schema", f"seed-{i}", json.dumps(schema).encode() + b"\0" + reply.encode())
        write("json_schema", f"seed-{i}-cut", json.dumps(schema).encode() + b"\0" + reply[: len(reply) // 2].encode())
    for i, template in enumerate(TEMPLATES):
        messages = b"\x00Be brief.\xff\x01Hello there\xff\x02Hi!\xff\x01And now?\xff"
        write("chat_template", f"seed-{i}", bytes([1]) + template.encode() + b"\xff" + messages)
    # Tokenizer: vocabulary selector, flags, text, 0xFF, then ids (big-endian u32).
    for i, text in enumerate(TEXTS):
        ids = b"".join(struct.pack(">I", x) for x in (1, 2, 300, 1000, 5, 0xFFFFFFFF))
        write("tokenizer", f"seed-{i}", bytes([i * 3, i]) + text.encode() + b"\xff" + ids)
    return 0


if __name__ == "__main__":
    sys.exit(main())
