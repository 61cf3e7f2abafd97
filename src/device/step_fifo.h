// StepFifo: the state of one connection (one direction between two ranks on
// one channel). See docs/fifo-protocol.md for the full argument.
//
// kFifoSteps slots of stepBytes each. The producer owns `tail`, the consumer
// owns `head`; each side keeps its own `step` (the next step it will fill or
// consume), which equals the counter it owns.
//
//   producer: wait head + kFifoSteps > step   (a free slot)
//             fill slot step % kFifoSteps, sizes[slot] = bytes
//             tail = step + 1   (release)
//   consumer: wait tail > step                (acquire: the slot's bytes and size are visible)
//             read slot step % kFifoSteps
//             head = step + 1   (release: our reads are done before the producer may overwrite)
//
// Invariant: head <= tail <= head + kFifoSteps. Counters only grow (64 bits:
// no wrap in practice), so "a > b" comparisons need no modular care.
#pragma once

#include "device/atomics.h"
#include "device/portable.h"
#include "device/signature.h"

namespace weft::device {

constexpr int kFifoSteps = 8;

// The words both sides share. Each counter has a 128-byte line of its own:
// the producer polls `head` while the consumer writes it and vice versa, and
// false sharing between them would turn every poll into a line transfer.
struct FifoControl {
  alignas(128) uint64_t tail;
  alignas(128) uint64_t head;
  // Bytes in each slot, written before `tail` is released. The consumer in a
  // kernel does not need them (both ends compute sizes identically); the
  // proxy does, to post network sends of the right length.
  alignas(128) int64_t sizes[kFifoSteps];
  // The call each step belongs to (device/signature.h), written with the
  // data; all zero until a checking producer writes them.
  alignas(128) uint64_t sigs[kFifoSteps][2];
};

// One side's handle on a connection: plain pointers valid in the address
// space of the side that uses it, plus that side's position. Trivially
// copyable so kernels can load it from device memory.
struct FifoEnd {
  char* slots;  // kFifoSteps * stepBytes, contiguous
  uint64_t* tail;
  uint64_t* head;
  int64_t* sizes;
  uint64_t* sigs;  // kFifoSteps pairs (word, count)
  int64_t stepBytes;
  uint64_t step;  // producer: steps published; consumer: steps consumed
  // The other side's counter as this side last read it (producer: head,
  // consumer: tail). Counters only grow, so while `seen` already allows the
  // next step the shared line is not read again: a producer with free slots
  // or a consumer with steps waiting touches no line the peer writes.
  uint64_t seen;
  int32_t peer;  // the rank at the other end (for messages)
  int32_t pad;
};

// Writes a working copy's position back to the end it was loaded from.
WEFT_HD void fifoSavePosition(FifoEnd* orig, const FifoEnd& local) {
  orig->step = local.step;
  orig->seen = local.seen;
}

WEFT_HD char* fifoSlot(const FifoEnd& end) {
  return end.slots + static_cast<int64_t>(end.step % kFifoSteps) * end.stepBytes;
}

// Producer side -------------------------------------------------------------

// Acquire pairs with the consumer's release of head: its reads of the slot we
// are about to overwrite happened before our writes.
// A cached `seen` comes from such an acquire made earlier by this side.
WEFT_HD bool fifoCanProduce(FifoEnd& end) {
  if (end.seen + kFifoSteps > end.step) return true;
  end.seen = loadAcquire(end.head);
  return end.seen + kFifoSteps > end.step;
}

// Release pairs with the consumer's acquire of tail: the slot bytes and size
// written before this store are visible to whoever sees the new tail.
WEFT_HD void fifoPublish(FifoEnd& end, int64_t bytes) {
  storeRelaxed(&end.sizes[end.step % kFifoSteps], bytes);
  end.step += 1;
  storeRelease(end.tail, end.step);
}

// The signature of the step about to be published (before fifoPublish,
// whose release makes it visible with the data).
WEFT_HD void fifoSign(FifoEnd& end, const CallSignature& sig) {
  uint64_t* at = end.sigs + 2 * (end.step % kFifoSteps);
  storeRelaxed(&at[0], sig.word);
  storeRelaxed(&at[1], sig.count);
}

// Consumer side -------------------------------------------------------------

WEFT_HD bool fifoCanConsume(FifoEnd& end) {
  if (end.seen > end.step) return true;
  end.seen = loadAcquire(end.tail);
  return end.seen > end.step;
}

// The signature of the step about to be consumed (after fifoCanConsume's
// acquire); word 0 when the producer did not sign it.
WEFT_HD CallSignature fifoSignature(const FifoEnd& end) {
  const uint64_t* at = end.sigs + 2 * (end.step % kFifoSteps);
  return CallSignature{loadRelaxed(&at[0]), loadRelaxed(&at[1])};
}

WEFT_HD int64_t fifoSlotBytes(const FifoEnd& end) { return loadRelaxed(&end.sizes[end.step % kFifoSteps]); }

// Release: our reads of the slot are complete before the producer sees it free.
WEFT_HD void fifoRelease(FifoEnd& end) {
  end.step += 1;
  storeRelease(end.head, end.step);
}

}  // namespace weft::device
