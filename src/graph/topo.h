// The topology model: one host as nodes (CPUs, PCI switches, GPUs,
// NVSwitches, NICs, networks) joined by typed links with bandwidths, and for
// every GPU and NIC the best path to every other one. Detected machines,
// NCCL topology files and the host backend's synthetic machines all become
// this one model; everything downstream (search, trees, transports) reads it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/link_bw.h"

namespace weft::graph {

enum class NodeType : uint8_t { kGpu, kPci, kNvs, kCpu, kNic, kNet, kCount };
// Physical links (C2C: a GPU's chip-to-chip link to its CPU, Grace).
enum class LinkType : uint8_t { kLoc, kNvl, kPci, kSys, kNet, kC2c };
// Path classes, best first, in NCCL 2.27's order and with its names: same
// device, NVLink direct or through NVSwitch, NVLink through an intermediate
// GPU, a GPU's C2C link to its CPU, one PCI switch, several PCI switches, a
// GPU and a NIC joined by the GPU's C2C link to its CPU and PCIe from there
// (P2C), a GPU and a NIC joined through an NVLink peer GPU next to the NIC
// (PXN), through a CPU host bridge, across CPUs, across the network,
// disconnected. path() never gives P2C or PXN; ncclPath() does.
enum class PathType : uint8_t { kLoc, kNvl, kNvb, kC2c, kPix, kPxb, kP2c, kPxn, kPhb, kSys, kNet, kDis };

const char* nodeTypeName(NodeType t);
const char* pathTypeName(PathType t);
// Parses LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS
// (case-insensitive); false if unknown.
bool parsePathType(const std::string& name, PathType* out);

struct Link {
  int to;
  LinkType type;
  double bw;  // GB/s
};

struct Node {
  NodeType type = NodeType::kCpu;
  std::string id;                 // PCI bus id for devices, numa id for CPUs, name for NICs
  int dev = -1;                   // GPU or NIC device index, CPU numa id
  int rank = -1;                  // GPUs: the rank that drives it (-1: none)
  int sm = 0;                     // GPUs: compute capability x 10 (0: not given)
  int c2cMbps = 0, c2cCount = 0;  // GPUs: the <c2c bw count> link to the CPU (0: none)
  std::string arch, vendor;       // CPUs
  int family = 0, model = 0;      // CPUs: family and model ids (bandwidth of the inter-socket link)
  double speedGbs = 0;            // NETs: port speed
  int parent = -1;                // the enclosing element in the XML hierarchy (-1: a CPU)
  // Attributes read from a file and not interpreted, written back verbatim.
  std::vector<std::pair<std::string, std::string>> extra;
  std::vector<std::pair<std::string, std::string>> gpuExtra;  // GPUs: of the <gpu> element itself
};

inline Node makeNode(NodeType type, std::string id) {
  Node n;
  n.type = type;
  n.id = std::move(id);
  return n;
}

struct Path {
  PathType type = PathType::kDis;
  double bw = 0;
  int hops = 0;
  int prev = -1;  // the node before the destination on the path (-1: none)
};

// One directed hop of a route: from `node` over its link `link` (an index
// into links(node)).
struct Hop {
  int node;
  size_t link;
};

class Topology {
 public:
  int addNode(Node node);
  // Links both directions.
  void connect(int a, int b, LinkType type, double bw);
  // Adds bandwidth to an existing link of the same type, else connects.
  void addBandwidth(int a, int b, LinkType type, double bw);

  const std::vector<Node>& nodes() const { return nodes_; }
  Node& node(int i) { return nodes_[static_cast<size_t>(i)]; }
  const Node& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  const std::vector<Link>& links(int i) const { return links_[static_cast<size_t>(i)]; }
  std::vector<int> nodesOf(NodeType type) const;  // in insertion order

  // Best path (highest bottleneck bandwidth, then fewest hops) from every
  // GPU and NET to every node; call after the last change.
  void computePaths();
  const Path& path(int from, int to) const;
  // The links of the best path from a GPU or NET to `to`, in order (empty
  // when there is none).
  std::vector<Hop> route(int from, int to) const;

  // The path as NCCL 2.27 classifies and prints it: path(from, to), except
  // between a GPU and a NET, where NCCL names two routes of its own, with
  // the bandwidth it gives them:
  //  - P2C (both directions): the GPU reaches the CPU the NIC hangs from
  //    over its C2C link (Grace); the bandwidth of that route.
  //  - PXN (GPU to NET only): the NIC's nearest GPU is an NVLink (or
  //    NVSwitch) peer of this one, at most PXB from the NIC, and nearer or
  //    faster to it than this GPU; bandwidth min(GPU to peer, peer to NET).
  // Plans read path(); this is what logs and weft-topo print.
  Path ncclPath(int from, int to) const;
  // For a PXN path: the peer GPU it goes through; -1 otherwise.
  int pxnPeer(int gpu, int net) const;

 private:
  void classifyNetPaths();

  std::vector<Node> nodes_;
  std::vector<std::vector<Link>> links_;
  std::vector<std::vector<Path>> paths_;  // [node][node]; only GPU/NIC rows filled
  struct NcclPath {
    Path path;
    int peer = -1;  // PXN: the GPU relayed through
  };
  std::map<std::pair<int, int>, NcclPath> ncclPaths_;  // (from, to) where NCCL's class differs from path()
};

// Across the sockets of `cpu` (see link_bw.h).
double cpuInterconnectBandwidth(const Node& cpu);

// The host backend's machine, one host of it: one CPU, NICs and `devices`
// devices (one per local rank, typed as GPUs so the same search runs) that
// reach each other through shared memory at `shmGbs`. One NIC per name in
// `nics` (the interfaces the socket network uses, so that the plan's NICs
// are its devices), each with a NET of that name; "net0" when none is given.
// Hosts are identical; multi-host plans repeat one host's search (see
// search.h).
constexpr double kSyntheticShmGbs = 8.0, kSyntheticNicGbs = 1.25;
Topology syntheticTopology(int devices, double shmGbs = kSyntheticShmGbs, double nicGbs = kSyntheticNicGbs,
                           const std::vector<std::string>& nics = {});

}  // namespace weft::graph
