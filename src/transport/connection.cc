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
  end->llLines = static_cast<char*>(base) + llOffset(stepBytes);
  end->llHead = &control->llHead;
  end->llStepBytes = device::llStepBytesFor(stepBytes);
  end->llStep = 0;
  end->llSeen = 0;
  end->reach = device::kReachNone;
  end->directSeq = &control->directSeq;
  end->directBase = &control->directBase;
  end->directCalls = 0;
  end->directMapped = 0;
}

}  // namespace weft::transport
