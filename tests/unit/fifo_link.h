// One in-process connection for data-path tests: the FIFO memory and both
// of its ends, as the host transports lay them out.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "device/step_fifo.h"
#include "transport/connection.h"

namespace weft::device {

struct Link {
  std::shared_ptr<void> memory;
  FifoEnd producer{};
  FifoEnd consumer{};
  Link(int64_t stepBytes, int from, int to) {
    const size_t bytes = transport::FifoLayout::totalBytes(stepBytes);
    // Page-aligned and zeroed, as the transports' memory.
    void* base = std::aligned_alloc(4096, bytes);
    std::memset(base, 0, bytes);
    memory.reset(base, [](void* p) { std::free(p); });
    transport::FifoLayout::attach(memory.get(), stepBytes, to, &producer);
    transport::FifoLayout::attach(memory.get(), stepBytes, from, &consumer);
  }
  uint64_t published() const { return *producer.tail; }
  uint64_t released() const { return *consumer.head; }
};

}  // namespace weft::device
