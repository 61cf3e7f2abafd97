#include "core/split.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "common/hash.h"
#include "common/log.h"
#include "core/comm.h"
#include "core/init.h"

namespace weft::core {
namespace {

struct SplitRecord {
  int32_t color;
  int32_t key;
  int32_t parentRank;
  int32_t pad;
  SocketAddress listen;
};

}  // namespace

Status splitComm(Comm* parent, int color, int key, const CommConfig& config, Comm** child) {
  *child = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return errorStatus(ncclInvalidArgument, "color is %d, expected a value >= 0 or NCCL_SPLIT_NOCOLOR (%d)", color,
                       NCCL_SPLIT_NOCOLOR);
  std::lock_guard<ExecLock> lock(parent->execMutex);
  if (!parent->failure.ok()) return parent->failure;
  Socket listen;
  if (color != NCCL_SPLIT_NOCOLOR) {
    WEFT_ASSIGN_OR_RETURN(listen, Bootstrap::listenOnBootstrapInterface());
  }
  std::vector<SplitRecord> records(static_cast<size_t>(parent->nranks));
  records[static_cast<size_t>(parent->rank)] =
      SplitRecord{color, key, parent->rank, 0, listen.valid() ? listen.localAddress() : SocketAddress{}};
  WEFT_RETURN_IF_ERROR(parent->bootstrap->allGather(records.data(), sizeof(SplitRecord)));
  const int splitIndex = parent->splitCount++;
  if (color == NCCL_SPLIT_NOCOLOR) return okStatus();

  std::vector<SplitRecord> members;
  for (const SplitRecord& r : records)
    if (r.color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [](const SplitRecord& a, const SplitRecord& b) {
    return a.key != b.key ? a.key < b.key : a.parentRank < b.parentRank;
  });
  std::vector<SocketAddress> addresses;
  int newRank = -1;
  for (const SplitRecord& m : members) {
    if (m.parentRank == parent->rank) newRank = static_cast<int>(addresses.size());
    addresses.push_back(m.listen);
  }
  uint64_t seed[3] = {parent->commHash, static_cast<uint64_t>(splitIndex), static_cast<uint64_t>(color)};
  const uint64_t secret = hashBytes(seed, sizeof(seed));

  auto comm = std::make_unique<ncclComm>();
  comm->rank = newRank;
  comm->nranks = static_cast<int>(addresses.size());
  comm->config = config;
  comm->backend = parent->backend;
  comm->gpusVisible = parent->gpusVisible;
  comm->cudaDev = parent->cudaDev;
  comm->commHash = hashBytes(&secret, sizeof(secret));
  comm->initTimes.api = "ncclCommSplit";
  auto bootstrap = Bootstrap::fromAddresses(newRank, std::move(addresses), std::move(listen), secret, &comm->abortFlag);
  if (!bootstrap.ok()) return bootstrap.status();
  comm->bootstrap = std::move(bootstrap).value();
  WEFT_INFO(log::kInit, "ncclCommSplit: parent rank %d color %d key %d -> rank %d of %d", parent->rank, color, key,
            newRank, comm->nranks);
  WEFT_RETURN_IF_ERROR(setupComm(comm.get()));
  *child = comm.release();
  return okStatus();
}

}  // namespace weft::core
