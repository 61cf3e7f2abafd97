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
  end->ll = device::LineRegion{static_cast<char*>(base) + llOffset(stepBytes),
                               &control->llHead,
                               &control->lineSigPacks[0][0][0],
                               &control->lineSigs[0][0][0],
                               device::llStepBytesFor(stepBytes),
                               0,
                               0};
  end->ll128 = device::LineRegion{static_cast<char*>(base) + ll128Offset(stepBytes),
                                  &control->ll128Head,
                                  &control->lineSigPacks[1][0][0],
                                  &control->lineSigs[1][0][0],
                                  device::ll128StepBytesFor(stepBytes),
                                  0,
                                  0};
  end->reach = device::kReachNone;
  end->directSeq = &control->directSeq;
  end->directBase = &control->directBase;
  end->directCalls = 0;
  end->directMapped = 0;
}

}  // namespace weft::transport
