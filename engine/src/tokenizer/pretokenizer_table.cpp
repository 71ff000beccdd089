// The pre-tokenizer dispatch table: tokenizer.ggml.pre names -> regex lists and settings, as in
// llama.cpp's llama-vocab.cpp. The regexes are written for PCRE2 with UTF and UCP, which handles
// \p{..}, {1,3} and the (?!\S) lookahead natively; non-ASCII literals are \x{..} escapes so the
// source cannot be changed by Unicode normalisation.
#include "tokenizer/pretokenizer_table.h"

#include <string>
#include <utility>

namespace iwb::tokenizer {
namespace {

// GPT-2's split: contractions, letters, numbers, other symbols, whitespace runs.
constexpr std::string_view kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";

// Llama 3 (tiktoken cl100k-like): case-insensitive contractions, numbers in groups of three.
constexpr std::string_view kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen2: as Llama 3 but every digit on its own.
constexpr std::string_view kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr std::string_view kQwen35 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr std::string_view kDigit = R"re(\p{N})re";
constexpr std::string_view kDigits = R"re(\p{N}+)re";
constexpr std::string_view kDigits3 = R"re(\p{N}{1,3})re";
constexpr std::string_view kNewline = R"re([\r\n])re";

// CJK ideographs, the range U+0800..U+4E00 and Hangul, grouped (DeepSeek).
constexpr std::string_view kDeepseekCjk = R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

// DeepSeek LLM's letters: the cased letters (Lu, Ll, Lt) of Latin, Greek, Cyrillic, Armenian,
// Georgian, Cherokee, Glagolitic, Coptic, Deseret, Osage, Old Hungarian, Warang Citi, Adlam.
constexpr std::string_view kDeepseekLlmLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
// ASCII and full-width punctuation, quotes and CJK space/comma/full stop.
constexpr std::string_view kDeepseekLlmPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";

// Han, Hiragana and Katakana runs (DeepSeek V3 and relatives).
constexpr std::string_view kCjkKana = R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
constexpr std::string_view kDeepseek3Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kSpark25Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re";

constexpr std::string_view kFalconPunct = R"re([\p{P}\$\+<=>\^~\|]+)re";
constexpr std::string_view kDefaultPunct = R"re([\p{P}\$\+<=>\^~\|]+)re";
constexpr std::string_view kThreeAsciiDigits = R"re([0-9][0-9][0-9])re";

// Everything up to whitespace or sentence punctuation (Latin, Devanagari, Arabic, CJK).
constexpr std::string_view kPoro = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)re";

// Tekken and GPT-4o: upper-then-lower letter runs. llama.cpp's rewrite of \p{Lu}/\p{Ll} as
// "letter that is not a-z / A-Z" is kept, so non-ASCII letters split exactly as there.
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGraniteEmbMulti =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr std::string_view kBailingMoe =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";
constexpr std::string_view kSeedCoder =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kUfakzeka =
    R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kExaoneMoe =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";
constexpr std::string_view kJais2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";
constexpr std::string_view kMinicpm5Main =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kLines = R"re([^\n]+|[\n]+)re";

struct Entry {
  std::vector<std::string_view> names;
  PreTokenizerFamily family;
};

PreTokenizerFamily make(std::string_view family, std::vector<std::string_view> regexes) {
  PreTokenizerFamily f;
  f.family = family;
  f.regexes = std::move(regexes);
  return f;
}

PreTokenizerFamily with_clean(PreTokenizerFamily f, bool clean) {
  f.clean_spaces = clean;
  return f;
}

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> e;
    e.push_back({{"default"}, make("default", {kDefaultPunct, kGpt2, kDigits, kThreeAsciiDigits})});
    {
      PreTokenizerFamily f = make("llama3", {kLlama3});
      f.ignore_merges = true;
      f.add_bos = true;
      e.push_back(
          {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
           f});
    }
    e.push_back({{"dbrx", "smaug-bpe"}, make("dbrx", {kLlama3})});
    {
      PreTokenizerFamily f = make("chatglm4", {kLlama3});
      f.has_bos = false;
      e.push_back({{"chatglm-bpe", "glm4"}, f});
    }
    e.push_back({{"jais-2"}, make("jais2", {kJais2})});
    e.push_back({{"deepseek-llm"},
                 with_clean(make("deepseek-llm", {kNewline, kDeepseekLlmLetters, kDeepseekLlmPunct, R"re(\s+$)re",
                                                  kDeepseekCjk, kDigits}),
                            false)});
    e.push_back(
        {{"deepseek-coder"},
         with_clean(make("deepseek-coder", {kNewline, R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, kDigit}),
                    false)});
    e.push_back({{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
                 with_clean(make("deepseek-v3", {kDigits3, kCjkKana, kDeepseek3Main}), false)});
    e.push_back({{"spark2_5"}, with_clean(make("spark2_5", {kDigits3, kCjkKana, kSpark25Main, kDigit}), false)});
    e.push_back({{"falcon"}, make("falcon", {kFalconPunct, kGpt2, kThreeAsciiDigits})});
    e.push_back(
        {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"}, make("starcoder", {kDigit, kGpt2})});
    e.push_back({{"command-r", "smollm"}, with_clean(make("starcoder", {kDigit, kGpt2}), false)});
    e.push_back({{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                  "modern-bert", "exaone4", "mpt", "olmo", "jais"},
                 make("gpt2", {kGpt2})});
    {
      PreTokenizerFamily f = make("gpt2", {kGpt2});
      f.add_sep = true;
      e.push_back({{"jina-v1-en", "jina-v2-code", "roberta-bpe"}, f});
    }
    e.push_back({{"trillion", "granite-docling"}, with_clean(make("gpt2", {kGpt2}), false)});
    e.push_back({{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2"},
                 with_clean(make("qwen2", {kQwen2}), false)});
    e.push_back({{"stablelm2", "megrez"}, make("qwen2", {kQwen2})});
    e.push_back({{"qwen35"}, with_clean(make("qwen35", {kQwen35}), false)});
    e.push_back({{"poro-chat"}, with_clean(make("poro", {kPoro}), false)});
    e.push_back({{"bloom", "gpt3-finnish"}, make("poro", {kPoro})});
    e.push_back({{"viking"}, with_clean(make("viking", {kPoro, kDigit}), false)});
    {
      PreTokenizerFamily f = with_clean(make("tekken", {kTekken}), false);
      f.ignore_merges = true;
      f.add_bos = true;
      e.push_back({{"tekken"}, f});
    }
    {
      PreTokenizerFamily f =
          with_clean(make("chameleon", {R"re(<sentinel:[0-9]+>)re", R"re((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)re",
                                        R"re(([\t\n]|    |  ))re", kDigit, R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2}),
                     false);
      f.add_bos = true;
      e.push_back({{"chameleon"}, f});
    }
    e.push_back({{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, with_clean(make("gpt4o", {kGpt4o}), false)});
    {
      PreTokenizerFamily f = with_clean(make("granite-embed-multi", {kGraniteEmbMulti}), false);
      f.ignore_merges = true;
      e.push_back({{"granite-embed-multi-97m"}, f});
    }
    e.push_back({{"bailingmoe", "bailingmoe2", "llada-moe"}, with_clean(make("bailingmoe", {kBailingMoe}), false)});
    e.push_back({{"seed-coder"}, with_clean(make("seed-coder", {kSeedCoder}), false)});
    e.push_back({{"ufakzeka"}, with_clean(make("ufakzeka", {kUfakzeka}), false)});
    e.push_back({{"laguna"}, with_clean(make("laguna", {kLines, kQwen2}), false)});
    e.push_back({{"exaone-moe"}, with_clean(make("exaone-moe", {kExaoneMoe}), false)});
    {
      // Gemma 4 (tokenizer.ggml.model "gemma4" names no pre-tokenizer; llama.cpp calls it
      // "gemma4"): merges run over whole lines of raw UTF-8, only newline runs are split off.
      PreTokenizerFamily f = make("gemma4", {kLines});
      f.is_byte_level = false;
      f.keeps_newline_runs = true;
      f.is_add_bos_forced = true;
      e.push_back({{"gemma4", "granite-embed-multi-311m"}, f});
    }
    {
      PreTokenizerFamily f = with_clean(make("sarvam-moe", {kLines}), false);
      f.is_byte_level = false;
      e.push_back({{"sarvam-moe"}, f});
    }
    {
      PreTokenizerFamily f = make("minicpm5", {kDigits3, kMinicpm5Main});
      f.ignore_merges = true;
      e.push_back({{"minicpm5"}, f});
    }
    return e;
  }();
  return entries;
}

}  // namespace

const PreTokenizerFamily* find_pre_tokenizer(std::string_view pre) {
  if (pre.empty()) pre = "default";
  for (const Entry& entry : table()) {
    for (std::string_view name : entry.names) {
      if (name == pre) return &entry.family;
    }
  }
  return nullptr;
}

}  // namespace iwb::tokenizer
