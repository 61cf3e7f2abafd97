#include "graph/rails.h"

#include <cstdio>
#include <cstdlib>

#include "graph/sysfs.h"

namespace weft::graph {

NicIdentity nicIdentity(const Topology& host, int net) {
  NicIdentity out;
  if (net < 0) return out;
  const Node& n = host.node(net);
  out.dev = n.dev;
  out.name = n.id;
  for (const auto& [key, value] : n.extra)
    if (key == "port") out.port = std::atoi(value.c_str());
  // A NIC on PCI is the node of its <pci> element, named by its bus id; a
  // NIC placed straight under a CPU (a virtual interface, the synthetic
  // host's) has no bus id.
  if (n.parent >= 0) out.busId = normalizeBusId(host.node(n.parent).id);
  return out;
}

int nearestNet(const Topology& host, int gpu, int channel) {
  if (gpu < 0) return -1;
  std::vector<int> best;
  for (int net : host.nodesOf(NodeType::kNet)) {
    const Path& p = host.path(gpu, net);
    if (p.type == PathType::kDis) continue;
    if (!best.empty()) {
      const Path& b = host.path(gpu, best.front());
      if (p.type > b.type || (p.type == b.type && p.bw < b.bw)) continue;
      if (p.type < b.type || p.bw > b.bw) best.clear();
    }
    best.push_back(net);
  }
  return best.empty() ? -1 : best[static_cast<size_t>(channel) % best.size()];
}

std::vector<NicIdentity> nicsOfDevices(const std::vector<NetDeviceName>& devices) {
  std::vector<NicIdentity> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    NicIdentity d;
    d.dev = static_cast<int>(i);
    d.name = devices[i].name;
    d.port = devices[i].port;
    const std::vector<std::string> buses = busIdsInPath(devices[i].pciPath);
    if (!buses.empty()) d.busId = buses.back();
    out.push_back(std::move(d));
  }
  return out;
}

namespace {

bool samePort(const NicIdentity& a, const NicIdentity& b) { return a.port <= 0 || b.port <= 0 || a.port == b.port; }

}  // namespace

RailMatch matchNic(const NicIdentity& planned, const std::vector<NicIdentity>& devices) {
  if (planned.dev < 0) return {};
  if (!planned.busId.empty())
    for (const NicIdentity& d : devices)
      if (d.busId == planned.busId && samePort(planned, d)) return {d.dev, "PCI bus id"};
  if (!planned.name.empty())
    for (const NicIdentity& d : devices)
      if (d.name == planned.name && samePort(planned, d)) return {d.dev, "name"};
  return {};
}

std::string describeNic(const NicIdentity& nic) {
  if (nic.dev < 0) return "none";
  std::string s = nic.name.empty() ? "NET " + std::to_string(nic.dev) : nic.name;
  if (nic.port > 0) s += " port " + std::to_string(nic.port);
  s += nic.busId.empty() ? ", not on PCI" : ", PCI " + nic.busId;
  return s;
}

std::string netPathsLine(const Topology& host, int gpu) {
  std::string out;
  for (int net : host.nodesOf(NodeType::kNet)) {
    const Path p = host.ncclPath(gpu, net);
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%sNET/%d %s (%d/%.1f/%s", out.empty() ? "" : ", ", host.node(net).dev,
                  host.node(net).id.c_str(), p.hops, p.bw, pathTypeName(p.type));
    out += buf;
    const int peer = host.pxnPeer(gpu, net);
    if (peer >= 0) out += " via GPU/" + std::to_string(host.node(peer).dev);
    out += ")";
  }
  return out.empty() ? "no NET" : out;
}

}  // namespace weft::graph
