// Greedy pairwise merging shared by the SPM and BPE tokenizers: start from one symbol per UTF-8
// character, keep a priority queue of adjacent pairs, and merge the best pair until none is
// left. The tokenizers differ only in how a pair is ranked (SPM: the merged piece's score; BPE:
// the merge's rank), which the caller passes in.
#pragma once

#include "tokenizer/utf8.h"

#include <algorithm>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace iwb::tokenizer {

struct MergeSymbol {
  int prev = -1;
  int next = -1;
  size_t offset = 0;  // into the text
  size_t length = 0;  // 0 once merged into the symbol on its left
};

// `priority(left, right)` returns how eagerly the two adjacent pieces merge (higher first), or
// nullopt when they cannot. Ties go to the leftmost pair, as in llama.cpp. Returns all symbols
// in text order; merged-away ones have length 0, so survivors are those with length > 0.
template <typename Priority>
std::vector<MergeSymbol> merge_symbols(std::string_view text, Priority&& priority) {
  struct Bigram {
    int left;
    int right;
    double priority;
    size_t length;  // merged length when queued; a mismatch later means the pair is stale
  };
  struct Order {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };

  std::vector<MergeSymbol> symbols;
  for (size_t offset = 0; offset < text.size();) {
    MergeSymbol sym;
    sym.offset = offset;
    sym.length = std::min(utf8::sequence_length(static_cast<unsigned char>(text[offset])), text.size() - offset);
    offset += sym.length;
    sym.prev = static_cast<int>(symbols.size()) - 1;
    sym.next = offset == text.size() ? -1 : static_cast<int>(symbols.size()) + 1;
    symbols.push_back(sym);
  }

  std::priority_queue<Bigram, std::vector<Bigram>, Order> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const MergeSymbol& l = symbols[static_cast<size_t>(left)];
    const MergeSymbol& r = symbols[static_cast<size_t>(right)];
    const std::optional<double> p = priority(text.substr(l.offset, l.length), text.substr(r.offset, r.length));
    if (p) queue.push({left, right, *p, l.length + r.length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    MergeSymbol& left = symbols[static_cast<size_t>(bigram.left)];
    MergeSymbol& right = symbols[static_cast<size_t>(bigram.right)];
    // Symbols only grow, so equal lengths mean neither side changed since queueing.
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }
  return symbols;
}

}  // namespace iwb::tokenizer
