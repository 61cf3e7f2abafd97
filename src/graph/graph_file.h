// NCCL's graph XML (NCCL_GRAPH_FILE in, NCCL_GRAPH_DUMP_FILE out):
//
//   <graphs version="1">
//     <graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra="20" speedinter="20"
//            latencyinter="0" typeintra="NVL" typeinter="PIX" samechannels="0">
//       <channel><net dev="0"/><gpu dev="0" rank="0"/>...<gpu dev="7" rank="7"/><net dev="0"/></channel>
//     </graph>
//   </graphs>
//
// Graph id 0 is the ring graph (pattern 4, ring), id 1 the tree graph
// (pattern 3: all of a host's network traffic through one GPU, the chain
// head); other ids (CollNet, NVLS) are ignored on input. A channel lists the
// NET it enters by, the host's GPUs in order, and the NET it leaves by.
// GPUs are named by their dev attribute (a rank attribute is used only when
// no GPU has that dev); dev values may be decimal or 0x-prefixed hex.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "graph/channel_budget.h"
#include "graph/search.h"
#include "graph/xml.h"

namespace weft::graph {

constexpr int kRingGraphId = 0, kTreeGraphId = 1;
constexpr int kPatternTree = 3, kPatternRing = 4;

// Reads the rings and trees of `host` from a <graphs> document. Every
// channel must list each GPU of the host exactly once; errors name the
// graph, the channel and what is wrong.
Result<ImposedGraphs> graphsFromXml(const XmlNode& graphs, const Topology& host);
Result<ImposedGraphs> loadGraphFile(const std::string& path, const Topology& host);

// The searched rings and chains of `host` as a <graphs> document; GPUs carry
// their dev and, when set, their rank. With a budget, as NCCL writes its
// graphs: the ring graph's search channels (the first `searchChannels`
// rings) at its per-channel speeds; without, every ring at the rings'
// bottleneck bandwidth.
std::unique_ptr<XmlNode> graphsToXml(const Topology& host, const RingSearch& search,
                                     const ChannelBudget* budget = nullptr);

}  // namespace weft::graph
