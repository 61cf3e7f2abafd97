#include "core/unique_id.h"

#include <cstring>

#include "common/hash.h"
#include "common/log.h"
#include "common/params.h"

namespace weft::core {

static_assert(sizeof(UniqueIdContents) <= NCCL_UNIQUE_ID_BYTES, "unique id contents must fit");

ncclUniqueId packUniqueId(const UniqueIdContents& contents) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(id.internal, &contents, sizeof(contents));
  return id;
}

Result<UniqueIdContents> unpackUniqueId(const ncclUniqueId& id) {
  UniqueIdContents contents;
  std::memcpy(&contents, id.internal, sizeof(contents));
  if (contents.magic != kUniqueIdMagic || !contents.root.valid())
    return errorStatus(ncclInvalidArgument,
                       "commId is not an ncclUniqueId made by ncclGetUniqueId of this library "
                       "(bad magic 0x%016llx); pass the id from ncclGetUniqueId unchanged to every rank",
                       static_cast<unsigned long long>(contents.magic));
  return contents;
}

Result<UniqueIdContents> uniqueIdFromCommId() {
  std::string commId = param::commId();
  if (commId.empty()) return errorStatus(ncclInvalidUsage, "NCCL_COMM_ID is not set");
  Result<SocketAddress> address = SocketAddress::parse(commId);
  if (!address.ok()) return address.status().withContext("NCCL_COMM_ID");
  // Every rank must derive the same secret without talking: it can only come
  // from the variable itself (documented: NCCL_COMM_ID gives no secrecy).
  return UniqueIdContents{kUniqueIdMagic, hashString("weft-comm-id:" + commId), address.value()};
}

Result<UniqueIdContents> createUniqueId() {
  if (!param::commId().empty()) return uniqueIdFromCommId();
  std::vector<NetInterface> interfaces = findInterfaces(param::socketIfname(), param::socketFamily(), 1);
  if (interfaces.empty())
    return errorStatus(ncclSystemError,
                       "no usable network interface for the bootstrap root (NCCL_SOCKET_IFNAME=\"%s\")",
                       param::socketIfname().c_str());
  Result<Socket> listen = Socket::listen(interfaces[0].address);
  if (!listen.ok()) return listen.status().withContext("bootstrap root on " + interfaces[0].name);
  UniqueIdContents contents{kUniqueIdMagic, randomU64(), listen.value().localAddress()};
  WEFT_INFO(log::kBootstrap, "bootstrap root listening on %s (%s)", contents.root.toString().c_str(),
            interfaces[0].name.c_str());
  startRoot(std::move(listen).value(), contents.secret);
  return contents;
}

Status startRootForCommId(const UniqueIdContents& contents) {
  Result<Socket> listen = Socket::listen(contents.root);
  if (!listen.ok()) return listen.status().withContext("rank 0 starting the NCCL_COMM_ID bootstrap root");
  startRoot(std::move(listen).value(), contents.secret);
  return okStatus();
}

}  // namespace weft::core
