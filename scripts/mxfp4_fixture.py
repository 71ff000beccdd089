#!/usr/bin/env python3
"""Writes tests/kernels/data/mxfp4_ggml.dat: MXFP4 blocks with ggml's own dequantized floats, and
random floats with ggml's own quantized blocks, for test_mxfp4's bit-for-bit comparisons.

ggml's C code runs through ctypes (ggml_get_type_traits(GGML_TYPE_MXFP4)->to_float and
->from_float_ref, i.e. dequantize_row_mxfp4 and quantize_row_mxfp4_ref); none of it is copied.

    python3 scripts/mxfp4_fixture.py --ggml /work/llama-build/bin/libggml-base.so \
        -o tests/kernels/data/mxfp4_ggml.dat

Layout (little-endian): "IWBMXFP4", u32 dequant block count D, u32 quant block count Q;
D blocks (17 bytes each); D x 32 f32 (ggml's dequantization); Q x 32 f32 (quantizer input);
Q blocks (ggml's quantization). The seed is fixed, so the same library gives the same file.
"""
import argparse
import ctypes
import math
import random
import struct
import sys

GGML_TYPE_MXFP4 = 39
BLOCK = 32
BLOCK_BYTES = 17


class TypeTraits(ctypes.Structure):
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


# void (*)(const void * x, float * y, int64_t k) and void (*)(const float * x, void * y, int64_t k)
ROW_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def dequant_blocks(rng):
    """Every exponent 0..255, each block holding all 16 codes in both nibbles (shuffled), then
    random blocks of random exponents."""
    blocks = []
    for e in range(256):
        low = list(range(16))
        high = list(range(16))
        rng.shuffle(low)
        rng.shuffle(high)
        blocks.append(bytes([e]) + bytes(lo | (hi << 4) for lo, hi in zip(low, high)))
    for _ in range(64):
        blocks.append(bytes([rng.randrange(256)]) + bytes(rng.randrange(256) for _ in range(16)))
    return blocks


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def quant_inputs(rng):
    """Blocks of random floats across magnitudes (2^-120 .. 2^120, where ggml's exponent cast is
    defined), with the cases the rounding must get right: a largest value just below a power of
    two (floor(log2f) rounds up there), values halfway between two E2M1 codes, zeros, negative
    largest values, an all-zero block, and the largest f32."""
    out = []
    for i in range(96):
        scale = 2.0 ** rng.randint(-120, 120)
        block = [f32(rng.gauss(0.0, 1.0) * scale) for _ in range(BLOCK)]
        kind = i % 6
        if kind == 1:  # amax just below a power of two
            p = 2.0 ** rng.randint(-100, 100)
            block = [f32(rng.gauss(0.0, 1.0) * p / 8) for _ in range(BLOCK)]
            block[rng.randrange(BLOCK)] = f32(p * (1.0 - 2.0 ** -24)) * rng.choice((1, -1))
        elif kind == 2:  # ties between neighbouring codes at d = 2^(e-128) for amax = 4 * 2^k
            k = rng.randint(-60, 60)
            block = [0.0] * BLOCK
            block[0] = 4.0 * 2.0 ** k
            d = 2.0 ** (k - 1)  # e = k + 2 - 2 + 127 -> d = 2^(k + 127 - 128)
            for j in range(1, BLOCK):
                a = rng.randrange(7)
                lo, hi = [0, 1, 2, 3, 4, 6, 8, 12][a], [0, 1, 2, 3, 4, 6, 8, 12][a + 1]
                block[j] = (lo + hi) / 2.0 * d * rng.choice((1, -1))
        elif kind == 3:  # zeros and a negative largest value
            for j in range(0, BLOCK, 3):
                block[j] = 0.0
            block[5] = -4.0 * max(abs(v) for v in block)
        elif kind == 4 and i < 10:
            block = [0.0] * BLOCK
        elif kind == 5 and i < 12:
            block[7] = 3.4028234663852886e38
        out.append(block)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ggml", required=True, help="path of libggml-base.so")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    lib = ctypes.CDLL(args.ggml)
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    traits = lib.ggml_get_type_traits(GGML_TYPE_MXFP4).contents
    name = traits.type_name.decode()
    if name != "mxfp4" or traits.blck_size != BLOCK or traits.type_size != BLOCK_BYTES:
        sys.exit(f"type {GGML_TYPE_MXFP4} of this ggml is {name} ({traits.blck_size} x {traits.type_size} bytes), not MXFP4")
    to_float = ROW_FN(traits.to_float)
    from_float = ROW_FN(traits.from_float_ref)

    rng = random.Random(20261127)
    blocks = dequant_blocks(rng)
    raw = b"".join(blocks)
    src = ctypes.create_string_buffer(raw, len(raw))
    dst = (ctypes.c_float * (BLOCK * len(blocks)))()
    to_float(ctypes.addressof(src), ctypes.addressof(dst), BLOCK * len(blocks))

    inputs = quant_inputs(rng)
    flat = [x for b in inputs for x in b]
    qin = (ctypes.c_float * len(flat))(*flat)
    qout = ctypes.create_string_buffer(BLOCK_BYTES * len(inputs))
    from_float(ctypes.addressof(qin), ctypes.addressof(qout), len(flat))

    with open(args.output, "wb") as f:
        f.write(b"IWBMXFP4" + struct.pack("<II", len(blocks), len(inputs)))
        f.write(raw)
        f.write(bytes(dst))
        f.write(bytes(qin))
        f.write(qout.raw)
    print(f"{args.output}: {len(blocks)} blocks dequantized, {len(inputs)} blocks quantized by {args.ggml}")


if __name__ == "__main__":
    main()
