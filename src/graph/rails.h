// NIC rails: what the network layer needs to know of the NIC the plan
// routes a channel through. The search (search.h) picks per channel the NET
// a host is entered by and the one it is left by; a NET is a topology node,
// which means nothing to a network plugin, so this names it the two ways a
// plugin can recognise it: the PCI device it sits on (the plugin's pciPath)
// and its name (an IB HCA, a socket interface), with the port.
#pragma once

#include <string>
#include <vector>

#include "graph/topo.h"

namespace weft::graph {

struct NicIdentity {
  int dev = -1;       // the NET's index in the topology (-1: the plan names no NIC)
  std::string name;   // "mlx5_0", "eth1"
  std::string busId;  // normalised PCI bus id of the NIC; empty: not on PCI (virtual, synthetic)
  int port = 0;       // 0: not given
};

// The identity of NET node `net` of `host`; an empty one (dev -1) for -1.
NicIdentity nicIdentity(const Topology& host, int net);

// A network device as its plugin describes it (the properties' name, port
// and pciPath: the device's sysfs path).
struct NetDeviceName {
  std::string name;
  std::string pciPath;
  int port = 0;
};

// The devices as identities: dev is the device index, busId the last bus id
// on the pciPath.
std::vector<NicIdentity> nicsOfDevices(const std::vector<NetDeviceName>& devices);

// Which device is the planned NIC: the one on the same PCI device (and port,
// where both give one), else the one of the same name (and port). dev -1 when
// none matches, or when the plan names no NIC.
struct RailMatch {
  int dev = -1;
  const char* by = "";  // "PCI bus id" or "name"
};
RailMatch matchNic(const NicIdentity& planned, const std::vector<NicIdentity>& devices);

// For links the plan does not route (point-to-point, exchanges): the NETs
// nearest GPU node `gpu` (best path class, then bandwidth), the
// (channel mod count)-th of them, so channels spread over them; -1 when the
// host has no NET or `gpu` is -1.
int nearestNet(const Topology& host, int gpu, int channel);

// "mlx5_0 port 1, PCI 0000:23:00.0", for logs.
std::string describeNic(const NicIdentity& nic);

// GPU node `gpu`'s paths to every NET as NCCL classifies them
// (Topology::ncclPath), hops/GB/s/class: "NET/0 mlx5_0 (3/24.0/PIX),
// NET/1 mlx5_1 (5/20.6/PXN via GPU/1)"; "no NET" when there is none.
std::string netPathsLine(const Topology& host, int gpu);

}  // namespace weft::graph
