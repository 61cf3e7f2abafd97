#include "graph/link_bw.h"

#include <cstdlib>

namespace weft::graph {
namespace {

// NVLink, per link and direction. Source: NCCL 2.27 src/graph/topo.h
// (SM60_NVLINK_BW .. SM100_NVLINK_BW); sm_86 (GA10x NVLink bridges) has its
// own, lower figure, and everything from sm_100 on (Blackwell) the NVLink-5
// one. Below sm_60 there is no NVLink; NCCL answers the sm_80 figure there.
struct NvlinkRow {
  int minSm;
  double gbs;
};
constexpr NvlinkRow kNvlink[] = {
    {100, 40.1},  // NVLink 5 (B200, GB200, GB300)
    {90, 20.6},   // NVLink 4 (H100, H200, H800 with fewer links)
    {80, 20.0},   // NVLink 3 (A100); sm_86 is handled apart
    {70, 20.0},   // NVLink 2 (V100)
    {60, 18.0},   // NVLink 1 (P100)
};
constexpr double kNvlinkSm86 = 12.0;  // NVLink 3 bridges on GA10x (RTX 3090, A40, A10 with bridge)
constexpr double kNvlinkDefault = 20.0;

// PCI, per lane, in 100 Mb/s: NCCL 2.27 src/graph/topo.cc kvDictPciGen.
// Bandwidth in GB/s = lanes * rate / 80 (Gen3 x16 = 12 GB/s, NCCL's PCI_BW).
struct PciRow {
  double gts;
  int rate;
};
constexpr PciRow kPci[] = {{2.5, 15}, {5.0, 30}, {8.0, 60}, {16.0, 120}, {32.0, 240}, {64.0, 480}};
constexpr int kPciUnknownRate = 60;  // Gen3
constexpr int kPciUnknownWidth = 16;

// Between sockets: NCCL 2.27 src/graph/topo.h (BDW_QPI_BW .. ERP_QPI_BW,
// AMD_BW, P9_BW, ARM_BW, ZPI_BW, YONGFENG_ZPI_BW) and the model thresholds of
// its topo.cc: Intel family 6 models from 0x55 (Skylake-SP) 10, from 0x8F
// (Sapphire Rapids) 22, from 0xCF (Emerald Rapids) 40, older (Broadwell) 6.
constexpr double kQpiBroadwell = 6.0, kUpiSkylake = 10.0, kUpiSapphire = 22.0, kUpiEmerald = 40.0;
constexpr double kAmdInfinityFabric = 16.0;  // AMD EPYC
constexpr double kPower9 = 32.0;             // POWER9 X-bus
constexpr double kArm = 6.0;                 // Arm servers (Grace, Ampere)
constexpr double kZhaoxin = 6.0, kZhaoxinYongfeng = 9.0;

}  // namespace

double nvlinkBandwidth(int sm) {
  if (sm == 86) return kNvlinkSm86;
  for (const NvlinkRow& r : kNvlink)
    if (sm >= r.minSm) return r.gbs;
  return kNvlinkDefault;
}

int pciLaneRate(const std::string& speed) {
  // "16.0 GT/s PCIe", "16 GT/s": the number before "GT/s" names the generation.
  char* end = nullptr;
  const double gts = std::strtod(speed.c_str(), &end);
  if (end == speed.c_str()) return kPciUnknownRate;
  for (const PciRow& r : kPci)
    if (gts == r.gts) return r.rate;
  return kPciUnknownRate;
}

double pciBandwidth(int width, const std::string& speed) {
  return (width == 0 ? kPciUnknownWidth : width) * pciLaneRate(speed) / 80.0;
}

double c2cBandwidth(int mbPerSec, int count) { return mbPerSec * static_cast<double>(count) / 1000.0; }

double cpuInterconnectBandwidth(const std::string& arch, const std::string& vendor, int family, int model) {
  if (arch == "ppc64") return kPower9;
  if (arch == "arm64") return kArm;
  if (arch != "x86_64") return kLocalBandwidth;  // unknown: NCCL does not limit it either
  if (vendor == "GenuineIntel") {
    if (family != 6) return kQpiBroadwell;
    return model >= 0xCF ? kUpiEmerald : model >= 0x8F ? kUpiSapphire : model >= 0x55 ? kUpiSkylake : kQpiBroadwell;
  }
  if (vendor == "AuthenticAMD") return kAmdInfinityFabric;
  if (vendor == "CentaurHauls" || vendor == "  Shanghai  ")
    return family == 7 && model == 0x5B ? kZhaoxinYongfeng : kZhaoxin;
  return kLocalBandwidth;
}

}  // namespace weft::graph
