// The built-in network: TCP sockets on the interfaces NCCL_SOCKET_IFNAME
// selects, several sockets and helper threads per connection for bandwidth
// (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD), TCP_NODELAY everywhere so
// small messages never wait for Nagle. Exposed as a plugin table like any
// external network.
#pragma once

#include <string>

#include "transport/net/net_v8.h"

namespace weft::transport {

const weftNet_v8_t& socketNet();

// Helper threads per connection when NCCL_SOCKET_NTHREADS is unset, for a
// machine with `cores` cores (one data socket per thread by default).
int socketDefaultThreads(unsigned cores);

// The most recent failure the socket network saw on this thread, in words
// (the plugin interface itself returns only a code); empty when none.
std::string socketNetLastError();

}  // namespace weft::transport
