// Run-time CPU feature check shared by the kernels' dispatchers (private to kernels/src).
// IWB_CPU_PORTABLE=1 forces the portable loops, IWB_CPU_AVX2=1 caps the choice at AVX2,
// IWB_CPU_AVX_VNNI=1 at AVX-VNNI (where the CPU has it) and IWB_CPU_NO_AMX=1 keeps the AVX-512
// path off the AMX tiles, so one machine can test every path.
#pragma once

namespace iwb::detail {

// The widest kernel family this process uses, decided once.
enum class CpuPath {
  Portable,  // plain C++ loops
  Avx2,      // AVX2 + FMA + F16C (maddubs integer dot products)
  AvxVnni,   // AVX2's set plus AVX-VNNI (256-bit vpdpbusd; Intel client cores without AVX-512)
  Avx512,    // AVX2's set plus AVX-512 F/BW/VL/DQ and VNNI (dpbusd integer dot products)
};

CpuPath cpu_path();

// The CPU (and OS) run AVX-VNNI's 256-bit VEX instructions, whatever path was chosen.
bool has_avx_vnni();

// The AVX-512 path may also use AVX512-VBMI's byte permutes (Ice Lake, Zen 4 and later; not
// Skylake-X or Cascade Lake); false when the environment sets IWB_CPU_NO_VBMI=1, so the tests
// can cover the kernels without them too.
bool has_avx512_vbmi();

// The AVX-512 path may also use AMX tiles (Sapphire Rapids and later): the CPU reports AMX-TILE
// and AMX-INT8 (resp. AMX-BF16), the kernel granted this process the tile data state
// (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+) and IWB_CPU_NO_AMX=1 is not set. Asked once.
bool has_amx_int8();
bool has_amx_bf16();
// Why AMX is not used ("" when it is): "the CPU has no AMX", "the kernel refused the tile
// data state: <errno text>", "disabled by IWB_CPU_NO_AMX=1", ...
const char* amx_unused_reason();

// AVX2 + FMA + F16C (true on the Avx512 path too); false when the environment sets IWB_CPU_PORTABLE=1.
bool has_avx2_fma_f16c();

// True when the environment sets IWB_MATMUL_EXACT=1: every matmul keeps its activations in f32
// (as MatmulArgs::is_exact), so whole forward passes can be compared with an f32 reference.
bool is_matmul_exact_forced();

// How one-token matmuls (decode) stream their weight rows: each thread's chunk of rows is read
// as `streams` sequential streams in turn, and `prefetch_bytes` > 0 fetches each row that far
// ahead of the row being read in software. Chosen per CPU vendor from measurements (see
// matmul_driver.cpp); IWB_DECODE_STREAMS, IWB_DECODE_PREFETCH, IWB_DECODE_SEGMENT,
// IWB_DECODE_SINGLE_STREAM_BYTES and IWB_DECODE_TILE_ACTIVATION_BYTES override them for experiments.
struct DecodeStreaming {
  int streams = 2;
  int prefetch_bytes = 0;
  int segment_bytes = 0;            // > 0: rows longer than this are dotted in segments (matmul_driver.cpp)
  int single_stream_row_bytes = 0;  // > 0: rows of at least this many bytes stream one at a time
  // > 0: one-token products of F16/BF16/F32 weights whose f32 activations take at least this
  // many bytes run the 4-row tiles instead, without software prefetch: the activations then
  // pass through L1 once per four rows instead of once per row.
  int tile_activation_bytes = 0;
  // > 0: Q4_0's decode layout (DotKernels::decode_dot, VBMI) only while one row's inputs take
  // fewer bytes than this in it; longer rows take the general one-token dot on Q8_0 blocks.
  int q4_0_layout_max_bytes = 0;
  // The same for the AVX2 Q4_K/Q5_K decode layout (quant_dot_avx2_kernels.inc): 0 everywhere
  // (no limit); IWB_DECODE_K_LAYOUT_MAX_BYTES=1 turns it off, to compare.
  int k_layout_max_bytes = 0;
  // > 0: the K-quants' token-lane kernels (AVX-512) from this many tokens instead of 5.
  int k_lanes_min_tokens = 0;
  // Tokens up to which Q4_K/Q5_K products run in decode steps on their AVX-512 decode layout
  // (2..kMaxDecodeTokens; its several-token kernel unpacks each row once for all of them).
  int k_decode_max_tokens = 2;
};
const DecodeStreaming& decode_streaming();

}  // namespace iwb::detail
