#include "graph/p2p_level.h"

namespace weft::graph {

Result<std::optional<PathType>> parseP2pLevel(const std::string& text) {
  if (text.empty()) return std::optional<PathType>{};
  PathType type;
  if (parsePathType(text, &type) && type <= PathType::kSys) return std::optional<PathType>{type};
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '5') {
    static const PathType kLegacy[] = {PathType::kLoc, PathType::kPix, PathType::kPxb,
                                       PathType::kPhb, PathType::kSys, PathType::kSys};
    return std::optional<PathType>{kLegacy[text[0] - '0']};
  }
  return errorStatus(ncclInvalidArgument,
                     "NCCL_P2P_LEVEL=\"%s\" is not a level: expected LOC, NVL, NVB, PIX, PXB, PHB, SYS or an integer "
                     "0..5",
                     text.c_str());
}

PathType defaultP2pLevel(const Topology& host) {
  for (int c : host.nodesOf(NodeType::kCpu)) {
    const Node& cpu = host.node(c);
    if (cpu.vendor == "GenuineIntel" || cpu.arch == "aarch64" || cpu.arch == "arm64") return PathType::kPxb;
  }
  return PathType::kSys;
}

}  // namespace weft::graph
