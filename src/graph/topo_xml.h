// NCCL's topology XML (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE) to and from the
// model: <system version="1"> holding <cpu> elements, nested <pci> bridges,
// <pci> devices holding a <gpu> (with <nvlink target count tclass>) or a
// <nic> (with <net> ports), and <nic> elements directly under a <cpu>.
#pragma once

#include <string>

#include "common/status.h"
#include "graph/topo.h"
#include "graph/xml.h"

namespace weft::graph {

Result<Topology> topologyFromXml(const XmlNode& system);
Result<Topology> loadTopologyFile(const std::string& path);
std::unique_ptr<XmlNode> topologyToXml(const Topology& topo);

}  // namespace weft::graph
