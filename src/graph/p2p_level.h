// NCCL_P2P_LEVEL: the worst path class between two GPUs over which direct
// (p2p) transfers are allowed. Pure parsing and defaults; core/connect.cc
// applies them to the path between two ranks' devices.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "graph/topo.h"

namespace weft::graph {

// NCCL's syntax: LOC, NVL, NVB, PIX, PXB, PHB or SYS (case-insensitive), or
// the legacy integers 0..5 (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and 5 SYS). Empty:
// unset (nullopt). Errors name the variable, the value and what is expected.
Result<std::optional<PathType>> parseP2pLevel(const std::string& text);

// The level when NCCL_P2P_LEVEL is unset, as NCCL decides it: SYS, but PXB
// (no P2P through the CPU) on Intel x86 and on ARM hosts, whose root
// complexes forward peer-to-peer PCIe traffic slowly.
PathType defaultP2pLevel(const Topology& host);

}  // namespace weft::graph
