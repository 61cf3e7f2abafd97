// Which network carries traffic between hosts: the built-in socket network,
// or an external plugin (NCCL_NET_PLUGIN: a library exporting a v8 plugin
// table, found as given or as libnccl-net-<name>.so), chosen by name with
// NCCL_NET. Chosen once per process.
#pragma once

#include <string>

#include "common/status.h"
#include "transport/net/net_v8.h"

namespace weft::transport {

struct Network {
  const weftNet_v8_t* api = nullptr;
  int devices = 0;
  bool external = false;
  std::string library;  // external: the file it came from
};

Result<const Network*> network();

// What the network said about its last failure on this thread, for messages
// (only the built-in network says anything).
std::string networkLastError(const Network& net);

}  // namespace weft::transport
