#include "core/comm_registry.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::core {
namespace {

constexpr uintptr_t kLive = 1;  // low bit of a slot: the address holds a live communicator

struct Table {
  explicit Table(size_t capacity) : slots(capacity), mask(capacity - 1) {}
  std::vector<std::atomic<uintptr_t>> slots;  // 0: empty; else address | kLive-or-not
  size_t mask;                                // capacity - 1, capacity a power of two
};

size_t firstSlot(uintptr_t key, size_t mask) {
  // Fibonacci hashing: allocations are 16-byte aligned, so the low bits of
  // the address alone would crowd into a few slots.
  return static_cast<size_t>((key * 0x9e3779b97f4a7c15ull) >> 24) & mask;
}

// The slot holding `key`, or the empty slot where it would go. A table is
// never full (see insertLocked), so the probe ends.
std::atomic<uintptr_t>& probe(const Table& t, uintptr_t key, std::memory_order order) {
  for (size_t i = firstSlot(key, t.mask);; i = (i + 1) & t.mask) {
    const uintptr_t v = t.slots[i].load(order);
    if (v == 0 || (v & ~kLive) == key) return const_cast<std::atomic<uintptr_t>&>(t.slots[i]);
  }
}

class Registry {
 public:
  Registry() { current_.store(adopt(std::make_unique<Table>(64)), std::memory_order_release); }

  bool live(uintptr_t key) const {
    // Acquire: a table published by a rebuild is seen filled.
    const Table* t = current_.load(std::memory_order_acquire);
    return probe(*t, key, std::memory_order_acquire).load(std::memory_order_acquire) == (key | kLive);
  }

  void set(uintptr_t key, bool live) {
    std::lock_guard<std::mutex> lock(mutex_);
    Table* t = current_.load(std::memory_order_relaxed);
    std::atomic<uintptr_t>* slot = &probe(*t, key, std::memory_order_relaxed);
    if (slot->load(std::memory_order_relaxed) == 0) {
      if (!live) return;  // never registered: nothing to mark
      if ((used_ + 1) * 2 > t->mask + 1) t = grow();
      slot = &probe(*t, key, std::memory_order_relaxed);
      ++used_;
    }
    slot->store(key | (live ? kLive : 0), std::memory_order_release);
  }

 private:
  // Doubles the table; the copy is filled before it is published (release).
  Table* grow() {
    const Table* old = current_.load(std::memory_order_relaxed);
    auto fresh = std::make_unique<Table>((old->mask + 1) * 2);
    for (const auto& slot : old->slots) {
      const uintptr_t v = slot.load(std::memory_order_relaxed);
      if (v != 0) probe(*fresh, v & ~kLive, std::memory_order_relaxed).store(v, std::memory_order_relaxed);
    }
    Table* published = adopt(std::move(fresh));
    current_.store(published, std::memory_order_release);
    return published;
  }

  Table* adopt(std::unique_ptr<Table> table) {
    tables_.push_back(std::move(table));
    return tables_.back().get();
  }

  std::mutex mutex_;
  std::atomic<Table*> current_{nullptr};
  std::vector<std::unique_ptr<Table>> tables_;  // every table ever published (see the header)
  size_t used_ = 0;                             // non-empty slots of the current table
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: calls may come during exit
  return *r;
}

}  // namespace

void registerComm(const void* comm) { registry().set(reinterpret_cast<uintptr_t>(comm), true); }

void unregisterComm(const void* comm) { registry().set(reinterpret_cast<uintptr_t>(comm), false); }

bool isLiveComm(const void* comm) {
  const uintptr_t key = reinterpret_cast<uintptr_t>(comm);
  return (key & kLive) == 0 && key != 0 && registry().live(key);
}

}  // namespace weft::core
