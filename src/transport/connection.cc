#include "transport/connection.h"

namespace weft::transport {

void FifoLayout::attach(void* base, int64_t stepBytes, int peer, device::FifoEnd* end) {
  auto* control = static_cast<device::FifoControl*>(base);
  static_assert(sizeof(device::FifoControl) <= kControlBytes, "FifoControl outgrew its page");
  end->slots = static_cast<char*>(base) + kControlBytes;
  end->tail = &control->tail;
  end->head = &control->head;
  end->sizes = control->sizes;
  end->stepBytes = stepBytes;
  end->slotGap = 0;
  end->step = 0;
  end->seen = 0;
  end->peer = peer;
  // Line region `index` (0: LL, 1: LL128) at `offset` with its own head.
  auto region = [&](int index, size_t offset, uint64_t* head, int64_t lineStepBytes) {
    return device::LineRegion{static_cast<char*>(base) + offset,
                              head,
                              &control->lineSigPacks[index][0][0],
                              &control->lineSigs[index][0][0],
                              lineStepBytes,
                              0,
                              0};
  };
  end->ll = region(0, llOffset(stepBytes), &control->llHead, device::llStepBytesFor(stepBytes));
  end->ll128 = region(1, ll128Offset(stepBytes), &control->ll128Head, device::ll128StepBytesFor(stepBytes));
  end->reach = device::kReachNone;
  end->directSeq = &control->directSeq;
  end->directBase = &control->directBase;
  end->directCalls = 0;
  end->directMapped = 0;
  end->directReads = 0;
}

}  // namespace weft::transport
