// The IB network in a build without rdma-core's headers: a table whose
// init says so, so network choice falls through to sockets (and NCCL_NET=IB
// fails naming the reason).
#include <cstring>

#include "transport/net/ib/ib_net.h"

namespace weft::transport {
namespace {

constexpr const char* kWhy = "this Weft was built without infiniband/verbs.h (install libibverbs-dev and rebuild)";

ncclResult_t absentInit(weftNetLogger_t) { return ncclSystemError; }
ncclResult_t absentDevices(int* ndev) {
  *ndev = 0;
  return ncclSuccess;
}

// The other entries stay null: nothing calls them once init has failed.
weftNet_v8_t absentTable() {
  weftNet_v8_t table{};
  table.name = "IB";
  table.init = absentInit;
  table.devices = absentDevices;
  return table;
}

}  // namespace

const weftNet_v8_t& ibNet() {
  static const weftNet_v8_t table = absentTable();
  return table;
}

std::string ibNetLastError() { return kWhy; }

}  // namespace weft::transport
