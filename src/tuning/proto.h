// Protocol choice: NCCL_PROTO parsing and the per-call choice between LL and
// Simple. Pure functions of narrow inputs, like algo.h.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "tuning/algo.h"

namespace weft::tuning {

// Numbered as device::Proto.
enum class Protocol : int { kSimple = 0, kLL = 1, kLL128 = 2, kCount = 3 };

const char* protocolName(Protocol proto);

// Which protocols each collective may use. NCCL_PROTO syntax, as NCCL_ALGO's:
// "LL,Simple" for every collective, "^LL128" to exclude, "allreduce:LL;
// broadcast:simple" per collective; names are case-insensitive and unknown
// names are an error naming them.
class ProtoFilter {
 public:
  static Result<ProtoFilter> parse(const std::string& text);
  bool allows(CollKind coll, Protocol proto) const {
    return (mask_[static_cast<int>(coll)] >> static_cast<int>(proto)) & 1u;
  }
  // Whether the text named protocols at all (an empty NCCL_PROTO did not).
  bool explicitlySet() const { return set_; }
  // A collective allowed LL128 and neither Simple nor LL: the collective
  // kind, or kCount when there is none.
  CollKind onlyLL128() const;

 private:
  uint32_t mask_[static_cast<int>(CollKind::kCount)] = {~0u, ~0u, ~0u, ~0u, ~0u};
  bool set_ = false;
};

// LL's cost per byte is several times Simple's (half of each line is flag,
// every element passes through registers once per peer, every pack is
// polled), its gain one hand-off less per step. Measured on the host
// backend (weft-perf allreduce, NCCL_PROTO=LL against Simple, 2 ranks as
// threads, docs/performance.md): LL level with or ahead of Simple up to
// 128 B, behind from 512 B (1.1x) and 2 KiB (1.7x). Sizes are all ranks'
// bytes. The planner prices both protocols with the cost model
// (ProtoInputs::simpleUs, llUs; the default figures reproduce these
// bounds on 2 ranks); the bounds decide only a call it did not price.
constexpr int64_t kLLMaxBytesRing = 256;
constexpr int64_t kLLMaxBytesOneShot = 256;

struct ProtoInputs {
  CollKind coll = CollKind::kAllReduce;
  Algorithm algo = Algorithm::kRing;
  int64_t bytes = 0;        // all ranks' bytes, as for chooseAlgorithm
  bool llPossible = false;  // the backend runs LL and every link is within a node
  // The backend runs LL128 for this algorithm and every link keeps a 128-byte
  // store whole (one GPU, NVLink; the host's emulation needs nothing).
  bool ll128Possible = false;
  bool llByDefault = false;  // the backend picks LL by itself (else only when NCCL_PROTO allows LL and not Simple)
  // The cost model's estimates of the call under each protocol (<0: not
  // priced; the byte bounds above decide instead).
  double simpleUs = -1;
  double llUs = -1;
  double ll128Us = -1;  // priced only where the model may choose LL128
};

struct ProtoChoice {
  Protocol proto;
  const char* reason;
};

// The cheapest by the model of the protocols possible and allowed (LL
// where the call was not priced: when the message is small); else Simple.
// LL128 is priced only where the backend picks line protocols by itself
// (the host); its built-in figures, measured on the host, never beat both
// others (docs/performance.md), so by default it runs only where NCCL_PROTO
// leaves no other: LL128 alone, or LL128 and LL with Simple excluded, LL128
// above LL's size bound. A tuning file can give it figures that win.
ProtoChoice chooseProtocol(const ProtoInputs& in, const ProtoFilter& filter);

}  // namespace weft::tuning
