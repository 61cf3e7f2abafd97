#include "device/backend/host/host_run.h"

#include "device/run_work.h"

namespace weft::device {
namespace {

void runCollective(HostCoop& coop, const ChannelView& channel, const CollWork& work) {
  if (work.func == Func::kAllGather || work.func == Func::kBroadcast) return runDataOnly(coop, channel, work);
  switch (work.dtype) {
#define WEFT_CASE(T, kind) \
  case DataType::kind: return hostRunReducing_##kind(coop, channel, work);
    WEFT_HOST_TYPES(WEFT_CASE)
#undef WEFT_CASE
    default: return;
  }
}

}  // namespace

WaitFailureInfo hostRunChannel(const ChannelView& channel, const WorkItem* items, size_t count,
                               const HostWaitConfig& config, const CallSignature* signatures) {
  HostCoop coop(config);
  for (size_t i = 0; i < count && !coop.failed(); ++i) {
    coop.setCallSignature(signatures != nullptr ? signatures[i] : itemSignature(items[i]));
    if (items[i].kind == WorkItem::Kind::kColl)
      runCollective(coop, channel, items[i].coll);
    else
      runSendRecv(coop, items[i].p2p, channel.id);
  }
  return coop.failure();
}

}  // namespace weft::device
