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

#include <stddef.h>

#include "device/atomics.h"
#include "device/portable.h"
#include "device/signature.h"

namespace weft::device {

constexpr int kFifoSteps = 8;

// Steps of a line region (LL, LL128; prims_lines.h): deeper than the
// slots. A line step carries a whole call when the call is small, so the
// depth is how many small calls a producer may run ahead of its consumer
// before it waits; where ranks outnumber cores every such wait is a trip
// through the scheduler. With 8, 4 ranks on 2 cores broadcast 8 bytes at
// 0.55-1.1 us a call (samples of 100 calls; Open MPI 0.45), with 32 at
// 0.23 (docs/fifo-protocol.md, "The LL protocol"). A power of two (the
// slot is step % kLineSteps) and a multiple of kFifoSteps (a line step is
// a share of a slot, lineStepBytesFor).
constexpr int kLineSteps = 32;
static_assert((kLineSteps & (kLineSteps - 1)) == 0 && kLineSteps % kFifoSteps == 0,
              "line steps: a power of two and a multiple of the slots' count");

// The words both sides share. Each counter has a 128-byte line of its own:
// the producer polls `head` while the consumer writes it and vice versa, and
// false sharing between them would turn every poll into a line transfer.
struct FifoControl {
  alignas(128) uint64_t tail;
  // callHash() of each slot's call, written with the data beside `tail`:
  // the consumer's load of `tail` brings this line, so checking the call
  // costs no extra line transfer. 0 until a checking producer writes it.
  uint32_t sigHash[kFifoSteps];
  // Direct mode between processes (reach kReachShared): per slot, whether
  // the producer wrote this step's data straight into the consumer's buffer
  // (1) or into the slot (0). Written before tail's release like the data,
  // so a consumer never trusts its buffer on a step the producer put in the
  // slot: the two ends may choose differently and still agree per step.
  uint8_t directStep[kFifoSteps];
  alignas(128) uint64_t head;
  // Bytes in each slot, written before `tail` is released. The consumer in a
  // kernel does not need them (both ends compute sizes identically); the
  // proxy does, to post network sends of the right length.
  alignas(128) int64_t sizes[kFifoSteps];
  // Line regions (LL, LL128): steps the consumer has finished reading (the
  // producer's only wait; line data needs no tail, its lines carry their own
  // flags). One line each: the two regions are used by different calls.
  alignas(128) uint64_t llHead;
  alignas(128) uint64_t ll128Head;
  // Direct mode (prims_simple.h): the consumer posts its user buffer for its
  // directSeq-th direct call; the producer writes into it only after seeing
  // that very sequence number. directBase is the buffer's address in the
  // consumer's address space; between processes the consumer also says
  // where it lies (DirectPost: a shareable segment, or none).
  alignas(128) uint64_t directSeq;
  uint64_t directBase;
  uint64_t directSegment;    // DirectPost::segment
  uint64_t directSegOffset;  // DirectPost::segOffset
  uint64_t directSegBytes;   // DirectPost::segBytes
  uint64_t directOwner;      // DirectPost::owner
  // Direct reads (prims_simple.h directReadSend): per slot, where the step's
  // data lies in the producer's own input (its address there), or 0 when it
  // is in the slot. Written by the producer before tail's release on every
  // step of a direct call on a link with a mailbox, read by the consumer of
  // a direct call after its acquire of tail, like directStep.
  alignas(128) uint64_t readFrom[kFifoSteps];
  // Direct reads between processes (kReachShared, device/direct_reads.h):
  // the producer's post of its input for its n-th direct AllReduce call on
  // the link, under the same sequence lock as directSeq (2n when whole) and
  // with a DirectPost's fields (segment 0: not readable in place)...
  alignas(128) uint64_t readSeq;
  uint64_t readBase;
  uint64_t readSegment;
  uint64_t readSegOffset;
  uint64_t readSegBytes;
  uint64_t readOwner;
  // ... and the consumer's answer: 2n + 1 once it has mapped that input,
  // 2n when it will not read it (released after the mapping).
  alignas(128) uint64_t readAck;
  // The call each step belongs to in full (device/signature.h): written with
  // the data, read by the consumer only when the hash differs, to name it.
  alignas(128) uint64_t sigs[kFifoSteps][2];
  // The same for the line regions' steps (prims_lines.h), which have no
  // tail to sit beside: per region and slot one LL pack (16 bytes of line
  // memory) whose payload is the call's hash, flagged with the step like the
  // data, and the call in full. Index 0: the LL region, 1: LL128's.
  alignas(128) uint64_t lineSigPacks[2][kLineSteps][2];
  uint64_t lineSigs[2][kLineSteps][2];
};

// FifoEnd::tail points at the start of its FifoControl.
static_assert(offsetof(FifoControl, tail) == 0, "tail must open the FifoControl");
static_assert(offsetof(FifoControl, sigHash) + sizeof(uint32_t) * kFifoSteps <= 64,
              "the call hashes must share tail's cache line");
static_assert(offsetof(FifoControl, directStep) + kFifoSteps <= 64, "the direct flags must share tail's cache line");

// How far a FIFO's two ends reach each other's user buffers (FifoEnd::reach),
// the same at both ends of a connection (set by its transport).
constexpr int32_t kReachNone = 0;     // no shared mailbox (network links): never direct
constexpr int32_t kReachAddress = 1;  // one address space: the posted address is usable as is
constexpr int32_t kReachShared = 2;   // processes sharing the FIFO page: the post says how to reach

// What a consumer posts about its output buffer for one direct call between
// processes (the mailbox fields of FifoControl). segment 0: the buffer lies
// in no shareable segment; the producer may still reach it by cross-memory
// attach, or use the slots.
struct DirectPost {
  uint64_t base;       // the buffer in the consumer's address space
  uint64_t segment;    // the segment's id (its inode), 0: none
  uint64_t segOffset;  // the buffer's offset in the segment
  uint64_t segBytes;   // the segment's size
  uint64_t owner;      // (pid << 32) | fd of the segment in the consumer's process; pid alone without a segment
};

// How a producer writes one direct call's final segments to one peer.
enum class DirectWay : int32_t { kSlot = 0, kPointer = 1, kCrossMemory = 2 };

// Line bytes of one LL step: a Simple slot's bytes divided by the line
// steps per slot (kLineSteps / kFifoSteps), so that a region never takes
// more memory than the slots do; at most kLLMaxStepBytes, at least 128 and
// a multiple of it, so that the payload of a step (half of it) keeps chunk
// boundaries on 64-byte multiples. At the default FIFO sizes (1 MiB on the
// host, 4 MiB on cuda) the cap decides: 512 KiB per region.
constexpr int64_t kLLMaxStepBytes = 16 * 1024;
WEFT_HD constexpr int64_t lineStepBytesFor(int64_t stepBytes, int64_t cap) {
  const int64_t share = stepBytes / (kLineSteps / kFifoSteps);
  return share >= cap ? cap : (share < 128 ? 128 : share / 128 * 128);
}
WEFT_HD constexpr int64_t llStepBytesFor(int64_t stepBytes) { return lineStepBytesFor(stepBytes, kLLMaxStepBytes); }

// Line bytes of one LL128 step: the same rule and cap as LL's, whole
// 128-byte lines (15/16 of them payload). The region is allocated on every
// connection whether or not a call uses it.
constexpr int64_t kLL128MaxStepBytes = 16 * 1024;
WEFT_HD constexpr int64_t ll128StepBytesFor(int64_t stepBytes) {
  return lineStepBytesFor(stepBytes, kLL128MaxStepBytes);
}

// A region of flagged lines (LL or LL128): kLineSteps steps of stepBytes
// line bytes, with its own step sequence and flow control, independent of
// the Simple slots and of the other region. Each protocol has its own
// region, so a line is only ever read in the format it was written in.
struct LineRegion {
  char* lines;         // null: this connection has no such region
  uint64_t* head;      // steps the consumer has read (written by the consumer only)
  uint64_t* sigPacks;  // kLineSteps x 2 words: per slot the call's hash as an LL pack
  uint64_t* sigs;      // kLineSteps x 2 words: per slot the call in full
  int64_t stepBytes;
  uint64_t step;  // producer: steps written; consumer: steps read
  uint64_t seen;  // producer: head as last read
};

// One side's handle on a connection: plain pointers valid in the address
// space of the side that uses it, plus that side's position. Trivially
// copyable so kernels can load it from device memory.
struct FifoEnd {
  char* slots;  // kFifoSteps slots of stepBytes (+ slotGap), contiguous
  uint64_t* tail;
  uint64_t* head;
  int64_t* sizes;
  int64_t stepBytes;
  // Bytes between one slot's stepBytes and the next slot: 0, except on
  // network links, whose proxy sends each step's call signature in them.
  int64_t slotGap;
  uint64_t step;  // producer: steps published; consumer: steps consumed
  // The other side's counter as this side last read it (producer: head,
  // consumer: tail). Counters only grow, so while `seen` already allows the
  // next step the shared line is not read again: a producer with free slots
  // or a consumer with steps waiting touches no line the peer writes.
  uint64_t seen;
  int32_t peer;   // the rank at the other end (for messages)
  int32_t reach;  // kReach*: how direct mode may reach the other end's user buffers
  // The line regions: LL's (prims_ll.h) and LL128's (prims_ll128.h).
  LineRegion ll;
  LineRegion ll128;
  // Direct mode: the shared mailbox and the direct calls made on this end;
  // on a producer's end between processes (kReachShared), the calls whose
  // way was a pointer into the consumer's buffer (a mapped segment or
  // window), which tests read to see that path ran.
  uint64_t* directSeq;
  uint64_t* directBase;
  uint64_t directCalls;
  uint64_t directMapped;
  // On a producer's end: steps its consumer read from this rank's input in
  // place (direct reads), which tests read to see that path ran.
  uint64_t directReads;
};

// Writes a working copy's position back to the end it was loaded from:
// only the fields that moved. The team's leader calls it when a primitives
// object goes away; an object that did nothing (an exchange stage in which
// this rank has no piece) passed no barrier since its team loaded the end,
// so a write there, even of the same value, would race with a slower
// thread still copying the end (ThreadSanitizer found it in the emulated
// teams of tests/unit/team_coop.h). An object that moved a position passed
// its waits' barriers first, after every thread's copy.
WEFT_HD void fifoSavePosition(FifoEnd* orig, const FifoEnd& local) {
  auto save = [](uint64_t& to, uint64_t from) {
    if (to != from) to = from;
  };
  save(orig->step, local.step);
  save(orig->seen, local.seen);
  save(orig->ll.step, local.ll.step);
  save(orig->ll.seen, local.ll.seen);
  save(orig->ll128.step, local.ll128.step);
  save(orig->ll128.seen, local.ll128.seen);
  save(orig->directCalls, local.directCalls);
  save(orig->directMapped, local.directMapped);
  save(orig->directReads, local.directReads);
}

WEFT_HD char* fifoSlot(const FifoEnd& end) {
  return end.slots + static_cast<int64_t>(end.step % kFifoSteps) * (end.stepBytes + end.slotGap);
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

WEFT_HD FifoControl* fifoControl(const FifoEnd& end) { return reinterpret_cast<FifoControl*>(end.tail); }

// The signature of the step about to be published, and its hash (before
// fifoPublish, whose release makes them visible with the data).
WEFT_HD void fifoSign(FifoEnd& end, const CallSignature& sig, uint32_t hash) {
  FifoControl* control = fifoControl(end);
  const uint64_t slot = end.step % kFifoSteps;
  storeRelaxed(&control->sigs[slot][0], sig.word);
  storeRelaxed(&control->sigs[slot][1], sig.count);
  storeRelaxed(&control->sigHash[slot], hash);
}

// Consumer side -------------------------------------------------------------

WEFT_HD bool fifoCanConsume(FifoEnd& end) {
  if (end.seen > end.step) return true;
  end.seen = loadAcquire(end.tail);
  return end.seen > end.step;
}

// The hash and the signature of the step about to be consumed (after
// fifoCanConsume's acquire); 0 and word 0 when the producer did not sign it.
WEFT_HD uint32_t fifoSignatureHash(const FifoEnd& end) {
  return loadRelaxed(&fifoControl(end)->sigHash[end.step % kFifoSteps]);
}

WEFT_HD CallSignature fifoSignature(const FifoEnd& end) {
  const FifoControl* control = fifoControl(end);
  const uint64_t slot = end.step % kFifoSteps;
  return CallSignature{loadRelaxed(&control->sigs[slot][0]), loadRelaxed(&control->sigs[slot][1])};
}

WEFT_HD int64_t fifoSlotBytes(const FifoEnd& end) { return loadRelaxed(&end.sizes[end.step % kFifoSteps]); }

// Release: our reads of the slot are complete before the producer sees it free.
WEFT_HD void fifoRelease(FifoEnd& end) {
  end.step += 1;
  storeRelease(end.head, end.step);
}

}  // namespace weft::device
