#include "transport/net/net_rails.h"

#include <map>
#include <mutex>
#include <set>

#include "common/log.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

// True the first time `key` is seen in this process: an unmatched NIC is
// worth one line, not one per channel and direction.
bool firstTime(const std::string& key) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  const std::lock_guard<std::mutex> lock(mutex);
  return seen.insert(key).second;
}

std::string namesOf(const std::vector<graph::NicIdentity>& devices) {
  std::string out;
  for (const graph::NicIdentity& d : devices) out += (out.empty() ? "" : ", ") + graph::describeNic(d);
  return out;
}

}  // namespace

const std::vector<graph::NicIdentity>& netDeviceIdentities(const Network& net) {
  static std::mutex mutex;
  static std::map<const Network*, std::vector<graph::NicIdentity>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(&net);
  if (it != cache.end()) return it->second;
  std::vector<graph::NetDeviceName> names;
  for (int d = 0; d < net.devices; ++d) {
    NetProperties props;
    graph::NetDeviceName n;
    if (net.api->getProperties(d, &props) == ncclSuccess) n = {props.name, props.pciPath, props.port};
    if (n.name.empty()) n.name = "dev" + std::to_string(d);
    names.push_back(n);
  }
  return cache.emplace(&net, graph::nicsOfDevices(names)).first->second;
}

RailChoice chooseNetDevice(const LinkSpec& spec, const std::vector<graph::NicIdentity>& devices, const char* netName) {
  RailChoice choice;
  if (devices.empty()) return choice;
  const graph::RailMatch match = graph::matchNic(spec.nic, devices);
  if (match.dev >= 0) {
    choice.dev = match.dev;
    choice.planned = true;
  } else {
    choice.dev = spec.channel % static_cast<int>(devices.size());
    if (spec.nic.dev < 0) {
      if (firstTime(std::string(netName) + "/no plan"))
        WEFT_INFO(log::kNet | log::kGraph,
                  "NET/%s: the topology names no NIC for a network link (channel %d); links spread over the %zu "
                  "devices by channel",
                  netName, spec.channel, devices.size());
    } else if (firstTime(std::string(netName) + "/" + graph::describeNic(spec.nic))) {
      WEFT_INFO(log::kNet | log::kGraph,
                "NET/%s: the plan's NIC %s matches none of the network's devices (%s) by PCI bus id or name; its "
                "links spread over the devices by channel",
                netName, graph::describeNic(spec.nic).c_str(), namesOf(devices).c_str());
    }
  }
  choice.name = devices[static_cast<size_t>(choice.dev)].name;
  return choice;
}

}  // namespace weft::transport
