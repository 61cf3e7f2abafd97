// The built-in IB network: InfiniBand and RoCE through libibverbs (loaded at
// run time), RC queue pairs, the receiver offering buffers to the sender
// through a FIFO written by RDMA (ib_comm.h). Exposed as a version-8 plugin
// table like the socket network; net_plugin.cc chooses it before sockets
// when it finds an active port.
#pragma once

#include <string>

#include "transport/net/net_v8.h"

namespace weft::transport {

const weftNet_v8_t& ibNet();

// The most recent failure the IB network saw on this thread, in words (the
// plugin interface itself returns only a code); empty when none.
std::string ibNetLastError();

}  // namespace weft::transport
