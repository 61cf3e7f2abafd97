// Direct reads between processes (links of reach kReachShared): the
// handshake by which, in a direct ring AllReduce or ReduceScatter call, the
// next rank comes to read a producer's input in place: through its own
// mapping of the producer's ncclMemAlloc segment, or as is when both ranks
// are threads of one process over the shm transport. docs/fifo-protocol.md,
// "Direct reads between processes".
//
//   producer, entering its n-th direct call on the link (AllReduce or
//   ReduceScatter):
//       post its input (FifoControl::readSeq and fields, sequence lock as
//       directSeq): where it lies (a DirectPost: address, owner, and its
//       ncclMemAlloc segment if any) when reads are allowed, else owner 0
//   consumer, in the same call's handshake:
//       wait readSeq >= 2n; reach the posted input (Coop::resolveRead: its
//       own process, or its mapping of the segment);
//       readAck = 2n + 1 when reached, else 2n         (release)
//   producer, when it posted its input:
//       wait readAck >= 2n; 2n + 1: its first steps name where they lie
//       (readFrom) instead of carrying the data
//
// The consumer answers every post, so the producer's choice (WEFT_DIRECT_READ)
// needs no agreement: both ends only share that the call is a direct
// AllReduce or ReduceScatter. A consumer that cannot reach the input
// (private memory of another process, a segment it may not map) answers 2n
// and the steps go through the slots: that costs speed, never data. Nothing
// of the post is used beyond its call: it is resolved once per call, and
// the producer posts again only in its next call, which begins after this
// one's reads (ring AllReduce ends only once the steps read in place have
// been combined, ReduceScatter once they are released: see ring.h).
#pragma once

#include "device/atomics.h"
#include "device/portable.h"
#include "device/step_fifo.h"

namespace weft::device {

// The producer's post of its input for its directCalls-th direct call.
WEFT_HD void postReadable(const FifoEnd& end, const DirectPost& post) {
  FifoControl* control = fifoControl(end);
  storeRelaxed(&control->readSeq, 2 * end.directCalls - 1);
  fenceRelease();  // the busy mark before any field changes
  storeRelaxed(&control->readBase, post.base);
  storeRelaxed(&control->readSegment, post.segment);
  storeRelaxed(&control->readSegOffset, post.segOffset);
  storeRelaxed(&control->readSegBytes, post.segBytes);
  storeRelaxed(&control->readOwner, post.owner);
  storeRelease(&control->readSeq, 2 * end.directCalls);
}

// Where a consumer reads its producer's input in one call: the producer's
// address of it (readFrom values are in that space) and this process's.
struct ReadMap {
  uint64_t peerBase;
  uint64_t localBase;  // 0: not mapped, the steps come through the slots
};

// The consumer's side, on the recv end of its directCalls-th direct call:
// false while the producer has not posted. Once posted, maps what it names
// (a post past this call's means the producer finished it without a step on
// this link: nothing to read) and, when `answer` (the team's leader), tells
// the producer whether it will read. Other threads of a team resolve the
// same post without answering.
template <typename Coop>
WEFT_HD bool answerReadable(Coop& coop, const FifoEnd& end, bool answer, ReadMap* map) {
  FifoControl* control = fifoControl(end);
  const uint64_t want = 2 * end.directCalls;
  const uint64_t seq = loadAcquire(&control->readSeq);
  if (seq < want) return false;
  *map = ReadMap{0, 0};
  if (seq == want) {
    const DirectPost post{loadRelaxed(&control->readBase), loadRelaxed(&control->readSegment),
                          loadRelaxed(&control->readSegOffset), loadRelaxed(&control->readSegBytes),
                          loadRelaxed(&control->readOwner)};
    fenceAcquire();  // the fields' loads before the second look at the number
    uint64_t local = 0;
    if (loadRelaxed(&control->readSeq) == want && post.owner != 0 && coop.resolveRead(end.peer, post, &local))
      *map = ReadMap{post.base, local};
  }
  if (answer) storeRelease(&control->readAck, want + (map->localBase != 0 ? 1 : 0));
  return true;
}

// The producer's side: -1 while its consumer has not answered this call's
// post, else whether it reads in place (1) or not (0).
WEFT_HD int readableAnswer(const FifoEnd& end) {
  const uint64_t want = 2 * end.directCalls;
  const uint64_t ack = loadAcquire(&fifoControl(end)->readAck);
  if (ack < want) return -1;
  return ack == want + 1 ? 1 : 0;
}

}  // namespace weft::device
