// What bench-serve sends and when: prompts from the random, chat or file datasets, and the
// arrival schedule of vLLM's benchmark (gamma-distributed gaps; Poisson at burstiness 1).
#include "bench_serve_internal.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

namespace iwb::remote {
namespace {

using json = nlohmann::json;

// Short common words: most tokenizers with a real vocabulary spend one token on each (with its
// leading space), so a prompt of N words is about N tokens. The server's usage gives the exact
// count.
constexpr const char* kWords[] = {
    "the",   "of",     "and",   "to",    "in",    "is",     "you",   "that",   "it",    "he",    "was",   "for",
    "on",    "are",    "as",    "with",  "his",   "they",   "at",    "be",     "this",  "have",  "from",  "or",
    "one",   "had",    "by",    "word",  "but",   "not",    "what",  "all",    "were",  "we",    "when",  "your",
    "can",   "said",   "there", "use",   "an",    "each",   "which", "she",    "do",    "how",   "their", "if",
    "will",  "up",     "other", "about", "out",   "many",   "then",  "them",   "these", "so",    "some",  "her",
    "would", "make",   "like",  "him",   "into",  "time",   "has",   "look",   "two",   "more",  "write", "go",
    "see",   "number", "no",    "way",   "could", "people", "my",    "than",   "first", "water", "been",  "call",
    "who",   "oil",    "its",   "now",   "find",  "long",   "down",  "day",    "did",   "get",   "come",  "made",
    "may",   "part",   "over",  "new",   "sound", "take",   "only",  "little", "work",  "know",  "place", "year",
};

std::string random_words(std::mt19937_64& rng, int64_t count) {
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  std::string out;
  for (int64_t i = 0; i < count; ++i) {
    if (i > 0) out.push_back(' ');
    out += kWords[pick(rng)];
  }
  return out;
}

int64_t count_words(const std::string& text) {
  int64_t n = 0;
  bool in_word = false;
  for (const char c : text) {
    const bool is_space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!is_space && !in_word) ++n;
    in_word = !is_space;
  }
  return n;
}

// Conversations that look like real chat traffic: a system prompt, sometimes an earlier turn.
struct ChatSample {
  const char* system;
  const char* earlier_user;
  const char* earlier_assistant;
  const char* user;
};
constexpr ChatSample kChats[] = {
    {"You are a helpful assistant.", nullptr, nullptr,
     "Explain what a KV cache is in a transformer, in three sentences."},
    {"You are a concise assistant.", nullptr, nullptr, "Write a haiku about a lighthouse in winter."},
    {"You are a helpful assistant.", "What is the capital of France?", "The capital of France is Paris.",
     "And how many people live there, roughly?"},
    {"You are a senior software engineer.", nullptr, nullptr,
     "Review this function and suggest one improvement: int add(int a, int b) { return a + b; }"},
    {"You are a friendly tutor.", "I am learning about fractions.", "Great! Fractions describe parts of a whole.",
     "Why is one half bigger than one third?"},
    {"You are a helpful assistant.", nullptr, nullptr, "Give me a short packing list for a weekend hiking trip."},
    {"You are a travel guide.", nullptr, nullptr, "Suggest three things to do on a rainy afternoon in Lisbon."},
    {"You are a helpful assistant.", "Tell me a story about a dragon.",
     "Once upon a time a small dragon was afraid of fire.", "Continue the story: what happened next?"},
    {"You summarise text.", nullptr, nullptr,
     "Summarise: The meeting moved to Thursday because the projector was broken and two people were ill."},
    {"You are a helpful assistant.", nullptr, nullptr, "What are the pros and cons of working from home?"},
    {"You are a careful mathematician.", nullptr, nullptr, "Is 391 a prime number? Explain briefly."},
    {"You are a helpful assistant.", "I want to bake bread.", "Wonderful. Do you have flour, water, salt and yeast?",
     "Yes. What do I do first?"},
};

BenchPrompt chat_prompt(std::vector<RemoteMessage> messages) {
  BenchPrompt p;
  p.is_chat = true;
  for (const RemoteMessage& m : messages) p.approx_prompt_tokens += count_words(m.content);
  p.messages = std::move(messages);
  return p;
}

BenchPrompt text_prompt(std::string text) {
  BenchPrompt p;
  p.approx_prompt_tokens = count_words(text);
  p.prompt = std::move(text);
  return p;
}

// One dataset entry: {"prompt": ...} or a ShareGPT record {"conversations": [{"from", "value"}...]}.
std::optional<BenchPrompt> prompt_from_entry(const json& entry) {
  if (!entry.is_object()) return std::nullopt;
  if (auto it = entry.find("prompt"); it != entry.end() && it->is_string() && !it->get<std::string>().empty()) {
    return text_prompt(it->get<std::string>());
  }
  auto conv = entry.find("conversations");
  if (conv == entry.end()) conv = entry.find("messages");
  if (conv == entry.end() || !conv->is_array()) return std::nullopt;
  for (const json& turn : *conv) {
    if (!turn.is_object()) continue;
    const std::string from = turn.value("from", turn.value("role", std::string()));
    const std::string value = turn.value("value", turn.value("content", std::string()));
    if ((from == "human" || from == "user") && !value.empty()) return chat_prompt({{"user", value}});
  }
  return std::nullopt;
}

Result<std::vector<BenchPrompt>> file_prompts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(ErrorCode::NotFound, "dataset '" + path + "' is neither random, chat nor a readable file");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<BenchPrompt> prompts;
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    const json all = json::parse(text, nullptr, false);
    if (all.is_discarded() || !all.is_array()) return make_error(ErrorCode::CorruptFile, path + " is not valid JSON");
    for (const json& entry : all) {
      if (auto p = prompt_from_entry(entry)) prompts.push_back(std::move(*p));
    }
  } else {
    std::istringstream lines(text);
    std::string line;
    int line_number = 0;
    while (std::getline(lines, line)) {
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const json entry = json::parse(line, nullptr, false);
      if (entry.is_discarded()) {
        return make_error(ErrorCode::CorruptFile, path + ":" + std::to_string(line_number) + ": not a JSON line");
      }
      if (auto p = prompt_from_entry(entry)) prompts.push_back(std::move(*p));
    }
  }
  if (prompts.empty()) {
    return make_error(ErrorCode::CorruptFile, path +
                                                  " holds no prompts: expected JSON lines with \"prompt\", or ShareGPT "
                                                  "JSON with \"conversations\" holding a human turn");
  }
  return prompts;
}

}  // namespace

Result<std::vector<BenchPrompt>> make_bench_prompts(const BenchServeConfig& config) {
  if (config.num_prompts <= 0)
    return make_error(ErrorCode::InvalidArgument, "the number of prompts must be at least 1");
  std::mt19937_64 rng(config.seed);
  std::vector<BenchPrompt> out;
  out.reserve(static_cast<size_t>(config.num_prompts));
  if (config.dataset == "random") {
    if (config.input_len <= 0) return make_error(ErrorCode::InvalidArgument, "the input length must be at least 1");
    if (config.shared_prefix_len < 0)
      return make_error(ErrorCode::InvalidArgument, "the shared prefix cannot be negative");
    // The prefix comes first and is the same for every prompt, so a server with prefix caching
    // reuses it; the rest differs from its first word on.
    const std::string prefix = random_words(rng, config.shared_prefix_len);
    for (int64_t i = 0; i < config.num_prompts; ++i) {
      std::string text = prefix.empty() ? std::string() : prefix + " ";
      text += random_words(rng, config.input_len);
      out.push_back(text_prompt(std::move(text)));
    }
    return out;
  }
  std::vector<BenchPrompt> pool;
  if (config.dataset == "chat") {
    for (const ChatSample& c : kChats) {
      std::vector<RemoteMessage> messages = {{"system", c.system}};
      if (c.earlier_user) {
        messages.push_back({"user", c.earlier_user});
        messages.push_back({"assistant", c.earlier_assistant});
      }
      messages.push_back({"user", c.user});
      pool.push_back(chat_prompt(std::move(messages)));
    }
  } else {
    auto read = file_prompts(config.dataset);
    if (!read) return read.status();
    pool = std::move(*read);
  }
  // Shuffled once, then repeated in that order as often as num_prompts needs.
  std::shuffle(pool.begin(), pool.end(), rng);
  for (int64_t i = 0; i < config.num_prompts; ++i) out.push_back(pool[static_cast<size_t>(i) % pool.size()]);
  return out;
}

std::vector<double> arrival_offsets(int64_t num_requests, double request_rate, double burstiness, uint64_t seed) {
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(num_requests, 0)), 0.0);
  if (request_rate <= 0 || !std::isfinite(request_rate) || out.empty()) return out;
  const double shape = burstiness > 0 ? burstiness : 1.0;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  // Mean gap shape·scale = 1/rate; smaller shapes are burstier at the same mean rate.
  std::gamma_distribution<double> gap(shape, 1.0 / (request_rate * shape));
  for (size_t i = 1; i < out.size(); ++i) out[i] = out[i - 1] + gap(rng);
  return out;
}

}  // namespace iwb::remote
