// What one kernel call costs: floating-point operations and bytes moved to and from memory,
// counted from the arguments (not measured). The roofline view plots flops/bytes against time.
#pragma once

namespace iwb {

struct OpCost {
  double flops = 0;  // multiply-adds count as two
  double bytes = 0;  // weights as stored (quantized size), activations and caches read + written

  double arithmetic_intensity() const { return bytes > 0 ? flops / bytes : 0; }
  OpCost& operator+=(const OpCost& other) {
    flops += other.flops;
    bytes += other.bytes;
    return *this;
  }
};

}  // namespace iwb
