// Which network carries traffic between hosts: an external NCCL net plugin
// (NCCL_NET_PLUGIN), the built-in IB network (when it finds an HCA port), or
// the built-in socket network, chosen by name with NCCL_NET. Chosen once per
// process; see docs/network.md for the rules.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "transport/net/net_api.h"

namespace weft::transport {

struct Network {
  std::shared_ptr<NetApi> api;
  int devices = 0;
  bool external = false;
  std::string library;  // external: the file it came from
};

Result<const Network*> network();

// What the network said about its last failure on this thread, for messages
// (only the built-in network says anything).
std::string networkLastError(const Network& net);

// One attempt to use a plugin library: the network it gives, initialised and
// with devices, or why it cannot be used (`failure`, naming the library).
struct PluginLoad {
  Network net;
  std::string failure;
};

// Loads the plugin NCCL_NET_PLUGIN's `name` designates, as NCCL resolves it:
// `name` as given to the dynamic loader (a path, or a file name searched on
// the library path), then, for a bare name, libnccl-net-<name>.so. Takes the
// newest interface version the library exports (kNetNewestVersion down to
// kNetOldestVersion). Not cached: network() calls it once per process.
PluginLoad loadNetPlugin(const std::string& name);

}  // namespace weft::transport
