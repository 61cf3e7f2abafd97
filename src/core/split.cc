#include "core/split.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "common/hash.h"
#include "common/log.h"
#include "core/comm.h"
#include "core/cuda_backend.h"
#include "core/enqueue.h"
#include "core/failure.h"
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

struct ShrinkRecord {
  int32_t parentRank;
  int32_t flags;
  uint64_t excludeHash;  // of the caller's list, sorted: every survivor's must match
  SocketAddress listen;
};

// Shrink messages: tags from tag to tag + 2 per shrink, far above the set-up's.
constexpr int kShrinkTagBase = 1 << 24;

// The excluded ranks, checked and sorted.
Result<std::vector<int>> excludedRanks(const Comm& parent, const int* exclude, int count) {
  if (count < 0 || count >= parent.nranks)
    return errorStatus(ncclInvalidArgument,
                       "excludeRanksCount is %d, expected 0 to %d (the communicator has %d ranks, and the calling "
                       "rank stays)",
                       count, parent.nranks - 1, parent.nranks);
  if (count > 0 && exclude == nullptr)
    return errorStatus(ncclInvalidArgument, "excludeRanksList is NULL with excludeRanksCount %d, expected %d ranks",
                       count, count);
  std::vector<int> seenAt(static_cast<size_t>(parent.nranks), -1);
  for (int i = 0; i < count; ++i) {
    const int r = exclude[i];
    if (r < 0 || r >= parent.nranks)
      return errorStatus(ncclInvalidArgument,
                         "excludeRanksList[%d] is %d, expected a rank of the communicator, 0 to %d", i, r,
                         parent.nranks - 1);
    if (r == parent.rank)
      return errorStatus(ncclInvalidArgument,
                         "excludeRanksList[%d] is %d, the calling rank: an excluded rank must not call ncclCommShrink",
                         i, r);
    if (seenAt[static_cast<size_t>(r)] >= 0)
      return errorStatus(ncclInvalidArgument,
                         "excludeRanksList[%d] is %d, listed already at [%d]: expected each rank once", i, r,
                         seenAt[static_cast<size_t>(r)]);
    seenAt[static_cast<size_t>(r)] = i;
  }
  std::vector<int> sorted(exclude, exclude + count);
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

// NCCL_SHRINK_ABORT: what runs on the parent ends now, as under
// ncclCommAbort (host waits and kernels poll the flags), and the peers
// still in a call with this rank are told; nothing is freed.
void stopParent(Comm* parent) {
  const int state = parent->state.load();
  if (state == static_cast<int>(CommState::kReady) || state == static_cast<int>(CommState::kFailed))
    reportFailure(parent, parent->rank,
                  errorStatus(ncclInvalidUsage, "rank %d left with ncclCommShrink(NCCL_SHRINK_ABORT)", parent->rank));
  parent->abortFlag.store(1);
  if (parent->backend == weftBackendCuda) proxyFailureFlag(parent)->store(1, std::memory_order_release);
}

// The child of `parent` whose ranks listen at `addresses` (this rank at
// addresses[rank], on `listen`): its own bootstrap, then the usual set-up.
Status makeChild(const Comm& parent, int rank, std::vector<SocketAddress> addresses, Socket listen, uint64_t secret,
                 const CommConfig& config, const char* api, Comm** child) {
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->nranks = static_cast<int>(addresses.size());
  comm->config = config;
  comm->backend = parent.backend;
  comm->gpusVisible = parent.gpusVisible;
  comm->cudaDev = parent.cudaDev;
  comm->commHash = hashBytes(&secret, sizeof(secret));
  comm->initTimes.api = api;
  auto bootstrap = Bootstrap::fromAddresses(rank, std::move(addresses), std::move(listen), secret, &comm->abortFlag);
  if (!bootstrap.ok()) return bootstrap.status();
  comm->bootstrap = std::move(bootstrap).value();
  WEFT_RETURN_IF_ERROR(setupComm(comm.get()));
  *child = comm.release();
  return okStatus();
}

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

  WEFT_INFO(log::kInit, "ncclCommSplit: parent rank %d color %d key %d -> rank %d of %zu", parent->rank, color, key,
            newRank, addresses.size());
  return makeChild(*parent, newRank, std::move(addresses), std::move(listen), secret, config, "ncclCommSplit", child);
}

Status shrinkComm(Comm* parent, const int* exclude, int count, const CommConfig& config, int flags, Comm** child) {
  *child = nullptr;
  if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT)
    return errorStatus(ncclInvalidArgument,
                       "shrinkFlags is %d, expected NCCL_SHRINK_DEFAULT (%d) or NCCL_SHRINK_ABORT (%d)", flags,
                       NCCL_SHRINK_DEFAULT, NCCL_SHRINK_ABORT);
  WEFT_ASSIGN_OR_RETURN(std::vector<int> excluded, excludedRanks(*parent, exclude, count));
  WEFT_RETURN_IF_ERROR(ensureInitialised(parent));
  if (!parent->bootstrap)  // its init failed before the bootstrap existed
    return errorStatus(ncclInvalidUsage, "comm %p failed in init: %s", static_cast<void*>(parent),
                       parent->failure.message().c_str());
  if (flags == NCCL_SHRINK_ABORT) stopParent(parent);
  std::lock_guard<ExecLock> lock(parent->execMutex);  // in-flight operations have returned
  if (flags == NCCL_SHRINK_ABORT) {
    Status idle = cudaWaitIdle(parent, true);
    if (!idle.ok()) WEFT_WARN_STATUS(idle);
    parent->failure =
        errorStatus(ncclInvalidUsage,
                    "rank %d: comm %p was shrunk with NCCL_SHRINK_ABORT, which ended its operations: only "
                    "ncclCommDestroy or ncclCommAbort may follow",
                    parent->rank, static_cast<void*>(parent));
    parent->state.store(static_cast<int>(CommState::kFailed));
    ncclResult_t none = ncclSuccess;
    parent->asyncError.compare_exchange_strong(none, ncclInvalidUsage);
  }
  const int shrinkIndex = parent->splitCount++;
  std::vector<int> members;
  for (int r = 0, e = 0; r < parent->nranks; ++r) {
    if (e < static_cast<int>(excluded.size()) && excluded[static_cast<size_t>(e)] == r) {
      ++e;
      continue;
    }
    members.push_back(r);
  }
  const size_t self = static_cast<size_t>(std::find(members.begin(), members.end(), parent->rank) - members.begin());
  WEFT_ASSIGN_OR_RETURN(Socket listen, Bootstrap::listenOnBootstrapInterface());
  const uint64_t excludeHash = hashBytes(excluded.data(), excluded.size() * sizeof(int));
  std::vector<ShrinkRecord> records(members.size());
  records[self] = ShrinkRecord{parent->rank, flags, excludeHash, listen.localAddress()};
  const int tag = kShrinkTagBase + 4 * (shrinkIndex % (1 << 20));
  // Every record's list is the first survivor's: it checks them before it
  // sends anything, so what any survivor receives has passed.
  auto sameLists = [&](const void* all) -> Status {
    const auto* gathered = static_cast<const ShrinkRecord*>(all);
    for (size_t i = 0; i < members.size(); ++i)
      if (gathered[i].excludeHash != excludeHash)
        return errorStatus(ncclInvalidUsage,
                           "rank %d: rank %d called ncclCommShrink with another excludeRanksList than this rank's "
                           "(which excludes %d): expected the same list on every rank that stays",
                           parent->rank, gathered[i].parentRank, count);
    return okStatus();
  };
  Status gathered = parent->bootstrap->gatherAmong(members, tag, records.data(), sizeof(ShrinkRecord), sameLists);
  if (gathered.code() == ncclInvalidUsage && gathered.message().find("excludeRanksList") == std::string::npos)
    return gathered.withContext("the ranks that stay passed another excludeRanksList than this rank");
  WEFT_RETURN_IF_ERROR(gathered);
  std::vector<SocketAddress> addresses;
  for (const ShrinkRecord& r : records) addresses.push_back(r.listen);
  const uint64_t seed[4] = {parent->commHash, static_cast<uint64_t>(shrinkIndex), excludeHash, 0x5368726b};
  const uint64_t secret = hashBytes(seed, sizeof(seed));
  WEFT_INFO(log::kInit, "ncclCommShrink: parent rank %d of %d, %d excluded%s -> rank %zu of %zu", parent->rank,
            parent->nranks, count, flags == NCCL_SHRINK_ABORT ? " (NCCL_SHRINK_ABORT)" : "", self, members.size());
  return makeChild(*parent, static_cast<int>(self), std::move(addresses), std::move(listen), secret, config,
                   "ncclCommShrink", child);
}

}  // namespace weft::core
