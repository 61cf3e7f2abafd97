// Link bandwidths, in GB/s per direction, by kind and generation: the one
// table every model of a machine takes its figures from. The figures are the
// ones NCCL's topology code uses (its topo.h constants and PCI generation
// table, NCCL 2.27), so a path printed by Weft and one printed by NCCL for
// the same machine carry the same number; link_bw.cc names the source of
// each. They are planning figures (what a channel can expect to move), not
// the links' signalling rates.
#pragma once

#include <string>

namespace weft::graph {

// A device with itself, and the link between a CPU and a NIC that hangs
// directly from it (a virtual NIC: no PCI link to limit it).
constexpr double kLocalBandwidth = 5000.0;

// One NVLink of a GPU of compute capability `sm` (x10: 80 = sm_80).
double nvlinkBandwidth(int sm);

// A PCI link: `width` lanes at the speed named as sysfs and NCCL's files
// name it ("16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s"). A width of 0 (what many
// VMs report) counts as x16 and an empty or unknown speed as Gen3, as NCCL
// reads them; a negative width is refused by the loader before this.
double pciBandwidth(int width, const std::string& speed);
// The PCI generation's per-lane figure in 100 Mb/s units (NCCL's table):
// 15 (Gen1), 30, 60, 120, 240, 480 (Gen6); 60 when `speed` is not a known
// generation.
int pciLaneRate(const std::string& speed);

// A chip-to-chip (C2C) link between a GPU and its CPU (Grace): `count`
// links of `mbPerSec` MB/s each, as NCCL's <c2c bw count> element gives.
double c2cBandwidth(int mbPerSec, int count);

// Between two CPU sockets, from the CPU's arch, vendor, family and model
// attributes (NCCL's <cpu arch vendor familyid modelid>).
double cpuInterconnectBandwidth(const std::string& arch, const std::string& vendor, int family, int model);

// A network port's speed attribute (Mb/s) as GB/s.
inline double netBandwidth(double megabitsPerSec) { return megabitsPerSec / 8000.0; }

}  // namespace weft::graph
