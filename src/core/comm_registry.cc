#include "core/comm_registry.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::core {
namespace {

constexpr uintptr_t kLive = 1;  // low bit of a slot: the address holds a live communicator
constexpr size_t kInitialSlots = 64;

// Slots: 0 empty; else an address, with kLive while a communicator lives there.
struct Table {
  size_t mask;  // capacity - 1, capacity a power of two
  std::atomic<uintptr_t>* slots;
};

// The first table is static and the pointer to the current one is constant-
// initialised: a lookup is a load of it and a probe, with no guard for a
// function-local static and no allocation before the first communicator.
std::atomic<uintptr_t> gInitialSlots[kInitialSlots];
Table gInitialTable{kInitialSlots - 1, gInitialSlots};
std::atomic<const Table*> gCurrent{&gInitialTable};

size_t firstSlot(uintptr_t key, size_t mask) {
  // Fibonacci hashing: allocations are 16-byte aligned, so the low bits of
  // the address alone would crowd into a few slots.
  return static_cast<size_t>((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

// The slot holding `key`, or the empty slot where it would go. A table is
// never more than half full (Registry::set), so the probe ends.
std::atomic<uintptr_t>& slotFor(const Table& t, uintptr_t key) {
  for (size_t i = firstSlot(key, t.mask);; i = (i + 1) & t.mask) {
    const uintptr_t v = t.slots[i].load(std::memory_order_relaxed);
    if (v == 0 || (v & ~kLive) == key) return t.slots[i];
  }
}

// Changes, under one mutex. Tables replaced by a larger one are kept (see the
// header): a lookup may still be reading them.
class Registry {
 public:
  void set(uintptr_t key, bool live) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Table* t = gCurrent.load(std::memory_order_relaxed);
    std::atomic<uintptr_t>* slot = &slotFor(*t, key);
    if (slot->load(std::memory_order_relaxed) == 0) {
      if (!live) return;  // never registered: nothing to mark
      if ((used_ + 1) * 2 > t->mask + 1) t = grow(*t);
      slot = &slotFor(*t, key);
      ++used_;
    }
    // Release: the communicator, made before, is seen by a lookup that finds it live.
    slot->store(key | (live ? kLive : 0), std::memory_order_release);
  }

 private:
  // Doubles the table; the copy is filled before it is published (release).
  const Table* grow(const Table& old) {
    const size_t capacity = (old.mask + 1) * 2;
    storage_.push_back(std::make_unique<std::atomic<uintptr_t>[]>(capacity));
    for (size_t i = 0; i < capacity; ++i) storage_.back()[i].store(0, std::memory_order_relaxed);
    tables_.push_back(std::make_unique<Table>(Table{capacity - 1, storage_.back().get()}));
    const Table* fresh = tables_.back().get();
    for (size_t i = 0; i <= old.mask; ++i) {
      const uintptr_t v = old.slots[i].load(std::memory_order_relaxed);
      if (v != 0) slotFor(*fresh, v & ~kLive).store(v, std::memory_order_relaxed);
    }
    gCurrent.store(fresh, std::memory_order_release);
    return fresh;
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<std::atomic<uintptr_t>[]>> storage_;  // every table's slots, kept
  std::vector<std::unique_ptr<Table>> tables_;
  size_t used_ = 0;  // non-empty slots of the current table
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
  if (key == 0 || (key & kLive) != 0) return false;
  // Acquire: a table published by grow() is seen filled.
  const Table* t = gCurrent.load(std::memory_order_acquire);
  for (size_t i = firstSlot(key, t->mask);; i = (i + 1) & t->mask) {
    const uintptr_t v = t->slots[i].load(std::memory_order_acquire);
    if (v == (key | kLive)) return true;
    if (v == 0 || v == key) return false;
  }
}

}  // namespace weft::core
