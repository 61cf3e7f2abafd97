// Which device of the network a link uses: the one the plan's NIC is (by
// PCI bus id, else by name, graph/rails.h), or, when the plan names no NIC
// or none of the network's devices is it, the channel number modulo the
// device count, so channels still spread over every device. Each NIC that
// matches nothing is logged once (NET/GRAPH).
#pragma once

#include <string>
#include <vector>

#include "graph/rails.h"
#include "transport/net/net_plugin.h"

namespace weft::transport {

struct LinkSpec;

struct RailChoice {
  int dev = 0;
  bool planned = false;  // the NIC core named (LinkSpec::nic); false: spread by channel
  std::string name;      // the device's name, for logs
};

// The network's devices as identities (name, port, bus id from pciPath),
// read once per network.
const std::vector<graph::NicIdentity>& netDeviceIdentities(const Network& net);

// `netName` names the network in the log line.
RailChoice chooseNetDevice(const LinkSpec& spec, const std::vector<graph::NicIdentity>& devices, const char* netName);

}  // namespace weft::transport
