// One host, several views: every rank of a host detects the machine around
// its own GPU, and the ranks of the host must agree on one model. These are
// the pure XML operations behind that (core/topology.cc runs the exchange):
// fusing views, trimming a model to the GPUs a communicator uses, and
// naming which rank drives which GPU.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graph/xml.h"

namespace weft::graph {

std::unique_ptr<XmlNode> cloneXml(const XmlNode& node);

// The union of several <system> views of one host, deterministic in the
// order of `views` (callers pass them in rank order):
//  - elements are matched by identity: <cpu> by numaid, <pci> by busid
//    (anywhere in the tree: a device placed under different parents by two
//    views stays where the first view put it), <net> by name and port,
//    <nvlink> by target, <gpu> and a PCI device's <nic> by their parent;
//  - an attribute takes the first view's value, except a GPU's rank, where
//    a real rank (>= 0) replaces -1;
//  - GPU dev indices are CUDA ordinals of each rank's process and may
//    collide (each process may see its GPU as device 0); when they do, the
//    fused GPUs are renumbered in bus-id order.
std::unique_ptr<XmlNode> fuseTopologyViews(const std::vector<const XmlNode*>& views);

// NCCL_TOPO_FILE merged with what this process detected, as NCCL merges
// them: the file comes first (its PCI tree, link speeds, NIC placement and
// attributes win), detection adds what the file lacks (the <gpu> of a GPU
// the file lists only as a PCI function, its NVLinks, the <net> ports of
// NICs, devices the file does not list), matched by bus id wherever the
// file places them. Switches and CPUs that only detection named and that
// end up holding no device are dropped (their devices moved to the file's
// places). `detected` may be null: the file alone.
std::unique_ptr<XmlNode> mergeTopologyFile(const XmlNode& file, const XmlNode* detected);

// Whether a <system> has at least one <gpu>.
bool hasGpus(const XmlNode& system);

// Bus ids of the GPUs of a <system>, in document order.
std::vector<std::string> gpuBusIds(const XmlNode& system);

// Removes the <pci> elements of GPUs whose bus id is not in `keep`.
void keepGpus(XmlNode* system, const std::set<std::string>& keep);

// Sets the rank attribute of the GPUs listed (by bus id), and -1 on the others.
void setGpuRanks(XmlNode* system, const std::map<std::string, int>& rankOfBusId);

}  // namespace weft::graph
