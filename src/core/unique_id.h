// What an ncclUniqueId holds: the bootstrap root's address and a random
// secret. Connections that do not present the secret are dropped.
#pragma once

#include <cstdint>

#include "common/socket.h"
#include "common/status.h"
#include "nccl.h"

namespace weft::core {

struct UniqueIdContents {
  uint64_t magic;
  uint64_t secret;
  SocketAddress root;
};

constexpr uint64_t kUniqueIdMagic = 0x57656674426f6f74ull;  // "WeftBoot"

ncclUniqueId packUniqueId(const UniqueIdContents& contents);
Result<UniqueIdContents> unpackUniqueId(const ncclUniqueId& id);

// ncclGetUniqueId: starts a root in this process (a thread that serves one
// communicator's bootstrap), unless NCCL_COMM_ID names one.
Result<UniqueIdContents> createUniqueId();

// With NCCL_COMM_ID, rank 0 starts the root on that address during init.
Status startRootForCommId(const UniqueIdContents& contents);

// The id every rank derives from NCCL_COMM_ID (empty optional when unset).
Result<UniqueIdContents> uniqueIdFromCommId();

// Starts the root service on an already-listening socket (bootstrap_root.cc).
void startRoot(Socket listen, uint64_t secret);

}  // namespace weft::core
