// Primitives for the Simple protocol: bulk slots and head/tail counters
// (step_fifo.h). One verb call moves n elements in slices of at most one
// slot; each slice waits for every peer, moves data with one reduceCopy,
// then publishes (sends) and releases (receives).
#pragma once

#include "device/direct_reads.h"
#include "device/primitives.h"
#include "device/reduce_copy.h"
#include "device/step_fifo.h"

namespace weft::device {

template <typename T, typename RedOp, typename FanT, typename Coop>
class Primitives<T, RedOp, FanT, ProtoSimple, Coop> {
  static constexpr int kMaxRecv = FanT::kMaxRecv;
  static constexpr int kMaxSend = FanT::kMaxSend;
  static constexpr bool kInPlace = Coop::kOneThread;
  static_assert(kMaxRecv + 1 <= kMaxSrcs && kMaxSend + 1 <= kMaxDsts, "fan exceeds reduceCopy limits");
  // Every loop over the peers is bounded by the fan as well as the count.
  // Besides letting the compiler unroll, this keeps the code of different
  // fans different. Without the fan bound GCC 12 -O2 folded (-fipa-icf)
  // Fan<3,3>'s send verb with an identical-looking one of a smaller fan
  // whose loops were optimised for its one-entry array: one-shot ranks
  // published to their first peer only and hung (-fno-ipa-icf, or these
  // bounds, fixed it; tests/unit/oneshot_test.cc catches it).

 public:
  // A team of several threads copies the FIFO ends (each thread keeps its
  // own positions) and its leader writes the positions back when the object
  // goes away. A team of one thread (Coop::kOneThread: every rank of the
  // host backend) works on the ends in place: nothing else touches a rank's
  // own ends during its call, so the result is the same, without copying
  // two hundred bytes an end and comparing them back at every call.
  WEFT_HD Primitives(Coop& coop, const RedOp& op, int channel, FifoEnd* const* recvEnds, int nRecv,
                     FifoEnd* const* sendEnds, int nSend)
      : coop_(coop), op_(op), channel_(channel), nRecv_(nRecv), nSend_(nSend) {
    int64_t stepBytes = 0;
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) {
      recvOrig_[i] = recvEnds[i];
      if constexpr (!kInPlace) recvCopy_[i] = *recvEnds[i];
      stepBytes = stepBytes == 0 ? rx(i).stepBytes : minOf(stepBytes, rx(i).stepBytes);
    }
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
      sendOrig_[i] = sendEnds[i];
      if constexpr (!kInPlace) sendCopy_[i] = *sendEnds[i];
      stepBytes = stepBytes == 0 ? tx(i).stepBytes : minOf(stepBytes, tx(i).stepBytes);
    }
    stepElems_ = stepBytes / static_cast<int64_t>(sizeof(T));
  }

  // The barrier after the write-back: algorithms make objects over the
  // same ends one after another (exchange pieces, one-shot peers), and every
  // thread of the next one must load the positions the leader saved here.
  WEFT_HD ~Primitives() {
    if constexpr (!kInPlace) {
      if (coop_.leader()) {
        for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) fifoSavePosition(recvOrig_[i], recvCopy_[i]);
        for (int i = 0; i < kMaxSend && i < nSend_; ++i) fifoSavePosition(sendOrig_[i], sendCopy_[i]);
      }
      coop_.sync();
    }
  }

  Primitives(const Primitives&) = delete;
  Primitives& operator=(const Primitives&) = delete;

  WEFT_HD void send(const T* src, int64_t n) { genericOp<false, true, true, false>(src, nullptr, n, true, false); }
  WEFT_HD void recv(T* dst, int64_t n) { genericOp<true, false, false, true>(nullptr, dst, n, false, false); }
  WEFT_HD void recvReduceSend(const T* src, int64_t n) {
    genericOp<true, true, true, false>(src, nullptr, n, true, false);
  }
  WEFT_HD void recvReduceCopy(const T* src, T* dst, int64_t n, bool post) {
    genericOp<true, false, true, true>(src, dst, n, true, post);
  }
  // recvReduceCopy with every input combined in a fixed order (rank order),
  // the own input at position ownAt: every rank computes the same bits.
  WEFT_HD void recvReduceCopyInOrder(const T* src, T* dst, int64_t n, int ownAt, bool post) {
    genericOp<true, false, true, true>(src, dst, n, true, post, ownAt);
  }
  // recvReduceCopyInOrder of a partial result (no pre-op: it was applied when
  // the inputs were first read), for algorithms that combine partials.
  WEFT_HD void recvReduceCopyResult(const T* partial, T* dst, int64_t n, int ownAt, bool post) {
    genericOp<true, false, true, true>(partial, dst, n, false, post, ownAt);
  }
  // Forwards what one peer sent to another, unchanged (a relay).
  WEFT_HD void recvSend(int64_t n) { genericOp<true, true, false, false>(nullptr, nullptr, n, false, false); }
  WEFT_HD void recvReduceCopySend(const T* src, T* dst, int64_t n, bool post) {
    genericOp<true, true, true, true>(src, dst, n, true, post);
  }
  WEFT_HD void recvCopySend(T* dst, int64_t n) { genericOp<true, true, false, true>(nullptr, dst, n, false, false); }
  WEFT_HD void copySend(const T* src, T* dst, int64_t n) {
    genericOp<false, true, true, true>(src, dst, n, true, false);
  }
  // directSend sends a finished result (the tree root's output on the way
  // down), so unlike send it never applies the pre-op (PreMulSum's scalar
  // was applied when the inputs were first read).
  WEFT_HD void directSend(const T* result, int64_t n) {
    genericOp<false, true, true, false>(result, nullptr, n, false, false);
  }
  // Direct verbs: like their plain forms, except that after beginDirect a
  // link whose peer shares this address space carries only the step
  // signals: the sender writes into the receiver's user buffer at the
  // offset of its own output `dst`, and the receiver finds the data there.
  //   directCopySend      copySend (from may equal dst: in place)
  //   directRecvCopySend  recvCopySend          directRecv  recv
  //   directRecvReduceCopySend  recvReduceCopySend, received through the slot
  WEFT_HD void directCopySend(const T* from, T* dst, int64_t n) {
    genericOp<false, true, true, true, false, true>(from, dst, n, false, false);
  }
  WEFT_HD void directRecv(T* dst, int64_t n) {
    genericOp<true, false, false, true, true, false>(nullptr, dst, n, false, false);
  }
  WEFT_HD void directRecvCopySend(T* dst, int64_t n) {
    genericOp<true, true, false, true, true, true>(nullptr, dst, n, false, false);
  }
  WEFT_HD void directRecvReduceCopySend(const T* src, T* dst, int64_t n, bool post) {
    genericOp<true, true, true, true, false, true>(src, dst, n, true, post);
  }
  // send, except that in a direct call begun with reads allowed a link to a
  // peer of this address space (kReachAddress), or to a process that mapped
  // this call's input (device/direct_reads.h), carries no data: each step
  // names where its part of `src` lies (FifoControl::readFrom) and the
  // consumer's receiving verb reads it there, in place; the slot stays
  // unused. The caller guarantees that `src` stays untouched until the
  // consumer has read it (ring AllReduce: a segment's final value comes back
  // only after the next rank has combined it). Never with a pre-op, which
  // send applies to its input as it copies: there the steps copy.
  WEFT_HD void directReadSend(const T* src, int64_t n) {
    if constexpr (Coop::kHasDirectRead && !RedOp::kHasPre) {
      if (direct_ && readAllowed_)
        return genericOp<false, true, true, false, false, false, true>(src, nullptr, n, true, false);
    }
    send(src, n);
  }

  // The end of a call whose steps read in place have no way back to this
  // rank (ReduceScatter: nothing it receives is made from them): waits until
  // every consumer that may have read this rank's input in place released
  // every step, so the input is the caller's again when the call returns.
  // Every thread of a team holds the same links and decisions, so all wait.
  WEFT_HD void directReadsDone() {
    if constexpr (Coop::kHasDirectRead && !RedOp::kHasPre) {
      if (!direct_ || !readAllowed_) return;
      auto pending = [&](int i) {
        return (tx(i).reach == kReachAddress || readOk_[i]) && loadAcquire(tx(i).head) < tx(i).step;
      };
      auto drained = [&] {
        for (int i = 0; i < kMaxSend && i < nSend_; ++i)
          if (pending(i)) return false;
        return true;
      };
      auto culprit = [&] {
        for (int i = 0; i < kMaxSend && i < nSend_; ++i)
          if (pending(i)) return WaitSite{tx(i).peer, 1, channel_};
        return WaitSite{-1, 1, channel_};
      };
      coop_.waitUntil(drained, culprit);
    }
  }

  // Enters direct mode for one call whose outputs are the ownElems elements
  // at ownBase. Receive links with a shared mailbox post the buffer with the
  // next sequence number: it is ready for this call, since the call has
  // begun. Send links wait for their peer's post of the same number before
  // any write reaches its buffer. Every rank of a direct call calls this on
  // the same links, so the sequence numbers agree. False when the wait failed.
  // Between processes (kReachShared) the post also says where the buffer
  // lies (Coop::describeDirect) and the producer picks its way to write
  // there (Coop::resolveDirect): through its mapping of the consumer's
  // segment, by cross-memory attach, or through the slots.
  // readInPlace: directReadSend may let peers read this rank's input.
  // input/inputElems: the call's input, given in calls where the ends of
  // links between processes agree on reads in place (AllReduce and
  // ReduceScatter: see beginReads); null elsewhere. ownBase null: a call that
  // writes into no peer's buffer (ReduceScatter) posts and resolves no
  // output; both ends still count the call, so later posts keep their
  // numbers.
  WEFT_HD bool beginDirect(T* ownBase, int64_t ownElems, bool readInPlace = false, const T* input = nullptr,
                           int64_t inputElems = 0) {
    direct_ = true;
    readAllowed_ = readInPlace;
    ownBase_ = ownBase;
    const bool writable = ownBase != nullptr;
    bool described = false;
    DirectPost post{};
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) {
      if (rx(i).reach == kReachNone) continue;
      rx(i).directCalls += 1;
      if (!coop_.leader() || !writable) continue;
      if (rx(i).reach == kReachShared && !described) {
        post = coop_.describeDirect(ownBase, static_cast<uint64_t>(ownElems) * sizeof(T));
        described = true;
      }
      postDirect(rx(i), ownBase, post);
    }
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
      way_[i] = DirectWay::kSlot;
      resolved_[i] = tx(i).reach == kReachNone || !writable;
      if (tx(i).reach != kReachNone) tx(i).directCalls += 1;
    }
    beginReads(Coop::kHasDirectRead ? input : nullptr, inputElems);
    auto settled = [&] {
      const bool posted = peersPosted();
      const bool reads = readsSettled();
      return posted && reads;
    };
    if (!coop_.waitUntil(settled, [&] { return firstUnsettled(); })) return false;
    // The leader's wait resolved its copy of each send link's way; the other
    // threads resolve theirs from the same posts (its barrier orders their
    // loads after its acquire), or they would write their share of every
    // direct slice into the slot while the consumer reads its own buffer.
    // The posts cannot have changed since: a consumer posts its next call
    // only after this one, which needs our steps on every link we send on.
    // (Between processes each thread thus asks Coop::resolveDirect itself.)
    if (!coop_.leader()) {
      peersPosted();
      learnReads();
    }
    if (coop_.leader())
      for (int i = 0; i < kMaxSend && i < nSend_; ++i)
        if (tx(i).reach == kReachShared && way_[i] == DirectWay::kPointer) tx(i).directMapped += 1;
    return true;
  }

  // No peers: dst = post(pre(src)). Single-rank collectives end here.
  WEFT_HD void localCopy(const T* src, T* dst, int64_t n) {
    const T* srcs[1] = {src};
    T* dsts[1] = {dst};
    reduceCopy<1, 1, 1, 1>(coop_, op_, srcs, 1, dsts, 1, n, 0, true);
    coop_.sync();
  }

 private:
  // How many inputs and outputs a verb can have: its own buffer if it reads
  // or writes one, plus one slot per peer (at least one peer when it talks).
  template <bool Recv, bool Src>
  static constexpr int kVerbMinSrcs = (Src ? 1 : 0) + (Recv ? 1 : 0);
  template <bool Recv, bool Src>
  static constexpr int kVerbMaxSrcs = (Src ? 1 : 0) + (Recv ? kMaxRecv : 0);
  template <bool Send, bool Dst>
  static constexpr int kVerbMinDsts = (Dst ? 1 : 0) + (Send ? 1 : 0);
  template <bool Send, bool Dst>
  static constexpr int kVerbMaxDsts = (Dst ? 1 : 0) + (Send ? kMaxSend : 0);

  // The consumer's post of its n-th direct call, under a sequence lock:
  // directSeq = 2n - 1 (busy), the fields, then directSeq = 2n (release). A
  // producer that reads 2n before and after the fields read them whole.
  WEFT_HD void postDirect(FifoEnd& end, T* ownBase, const DirectPost& post) {
    storeRelaxed(end.directSeq, 2 * end.directCalls - 1);
    fenceRelease();  // the busy mark before any field changes
    storeRelaxed(end.directBase, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ownBase)));
    if (end.reach == kReachShared) {
      FifoControl* control = fifoControl(end);
      storeRelaxed(&control->directSegment, post.segment);
      storeRelaxed(&control->directSegOffset, post.segOffset);
      storeRelaxed(&control->directSegBytes, post.segBytes);
      storeRelaxed(&control->directOwner, post.owner);
    }
    storeRelease(end.directSeq, 2 * end.directCalls);
  }

  // Each send link's post is read once per call; then the way to write is
  // fixed for the whole call. A sequence past this call's means the consumer
  // already finished it: it needed no step of ours on this link (it could
  // not finish without them), so nothing will be written there; slots.
  WEFT_HD bool peersPosted() {
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
      if (resolved_[i]) continue;
      const uint64_t want = 2 * tx(i).directCalls;
      const uint64_t seq = loadAcquire(tx(i).directSeq);
      if (seq < want) return false;
      resolved_[i] = true;
      way_[i] = DirectWay::kSlot;
      if (seq > want) continue;
      const uint64_t base = loadRelaxed(tx(i).directBase);
      DirectPost post{base, 0, 0, 0, 0};
      if (tx(i).reach == kReachShared) {
        const FifoControl* control = fifoControl(tx(i));
        post = DirectPost{base, loadRelaxed(&control->directSegment), loadRelaxed(&control->directSegOffset),
                          loadRelaxed(&control->directSegBytes), loadRelaxed(&control->directOwner)};
      }
      fenceAcquire();                                         // the fields' loads before the second look at the number
      if (loadRelaxed(tx(i).directSeq) != want) continue;     // torn: the consumer moved on (see above)
      peerAddr_[i] = base;
      way_[i] =
          tx(i).reach == kReachShared ? coop_.resolveDirect(tx(i).peer, post, &peerAddr_[i]) : DirectWay::kPointer;
    }
    return true;
  }

  // Whom the handshake still waits for: a consumer's post or answer, or a
  // producer's post of its input.
  WEFT_HD WaitSite firstUnsettled() {
    for (int i = 0; i < kMaxSend && i < nSend_; ++i)
      if ((!resolved_[i] && loadAcquire(tx(i).directSeq) < 2 * tx(i).directCalls) ||
          (readPending_[i] && readableAnswer(tx(i)) < 0))
        return WaitSite{tx(i).peer, 1, channel_};
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i)
      if (!readAnswered_[i]) return WaitSite{rx(i).peer, 0, channel_};
    return WaitSite{-1, 1, channel_};
  }

  // Direct reads between processes (device/direct_reads.h), in calls given
  // their input: on every link between processes this rank posts its input
  // for the consumer, readable when reads are allowed (not with a pre-op,
  // which the steps apply as they copy): the consumer reads it in place when
  // it can reach it (the same process, or a segment it maps). It answers
  // each producer's post on its receive links.
  WEFT_HD void beginReads(const T* input, int64_t inputElems) {
    readPosts_ = input != nullptr;
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) {
      readMap_[i] = ReadMap{0, 0};
      readAnswered_[i] = !readPosts_ || rx(i).reach != kReachShared;
    }
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) readOk_[i] = readPending_[i] = false;
    if constexpr (Coop::kHasDirectRead) {
      if (!readPosts_ || !coop_.leader()) return;
      DirectPost post{};  // owner 0: not readable in place
      bool described = false;
      for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
        if (tx(i).reach != kReachShared) continue;
        if (readAllowed_ && !RedOp::kHasPre && !described) {
          post = coop_.describeDirect(input, static_cast<uint64_t>(inputElems) * sizeof(T));
          described = true;
        }
        postReadable(tx(i), post);
        readPending_[i] = described;
      }
    }
  }

  // The leader's part of the handshake's wait: answer every producer's post
  // (that never waits on anything but the post), then learn the answers to
  // its own readable posts.
  WEFT_HD bool readsSettled() {
    if constexpr (Coop::kHasDirectRead) {
      bool all = true;
      for (int i = 0; i < kMaxRecv && i < nRecv_; ++i)
        if (!readAnswered_[i]) readAnswered_[i] = answerReadable(coop_, rx(i), true, &readMap_[i]);
      for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) all = all && readAnswered_[i];
      for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
        if (!readPending_[i]) continue;
        const int answer = readableAnswer(tx(i));
        if (answer < 0) {
          all = false;
          continue;
        }
        readPending_[i] = false;
        readOk_[i] = answer == 1;
      }
      return all;
    } else {
      return true;
    }
  }

  // The other threads of a team, after the leader's wait: the same posts,
  // which cannot change before this call's steps, and the same answers.
  WEFT_HD void learnReads() {
    if constexpr (Coop::kHasDirectRead) {
      if (!readPosts_) return;
      for (int i = 0; i < kMaxRecv && i < nRecv_; ++i)
        if (!readAnswered_[i]) readAnswered_[i] = answerReadable(coop_, rx(i), false, &readMap_[i]);
      for (int i = 0; i < kMaxSend && i < nSend_; ++i)
        readOk_[i] = tx(i).reach == kReachShared && readableAnswer(tx(i)) == 1;
    }
  }

  // Whether the step about to be consumed on recv link i is already in the
  // own buffer. Between processes the producer says so per step
  // (FifoControl::directStep, read after fifoCanConsume's acquire of tail).
  WEFT_HD bool recvIsDirect(int i) const {
    if (!direct_) return false;
    if (rx(i).reach == kReachAddress) return true;
    if constexpr (Coop::kHasDirect) {
      if (rx(i).reach == kReachShared)
        return loadRelaxed(&fifoControl(rx(i))->directStep[rx(i).step % kFifoSteps]) != 0;
    }
    return false;
  }
  WEFT_HD DirectWay sendWay(int i) const { return direct_ ? way_[i] : DirectWay::kSlot; }

  // Where the step about to be consumed on recv link i lies for a verb that
  // does not expect it in the own buffer: in the slot, or, in a direct call,
  // where the producer's directReadSend named (its input, read in place;
  // FifoControl::readFrom, read after fifoCanConsume's acquire of tail):
  // that address within the process, this process's mapping of it between
  // processes (named only once this rank answered that it mapped it).
  WEFT_HD const T* recvSource(int i) const {
    if constexpr (Coop::kHasDirectRead) {
      if (direct_ && rx(i).reach != kReachNone) {
        const uint64_t at = loadRelaxed(&fifoControl(rx(i))->readFrom[rx(i).step % kFifoSteps]);
        if (at != 0) {
          const uint64_t here = rx(i).reach == kReachAddress ? at : readMap_[i].localBase + (at - readMap_[i].peerBase);
          return reinterpret_cast<const T*>(static_cast<uintptr_t>(here));
        }
      }
    }
    return reinterpret_cast<const T*>(fifoSlot(rx(i)));
  }

  WEFT_HD bool ready(int nr, int ns) {
    for (int i = 0; i < kMaxRecv && i < nr; ++i)
      if (!fifoCanConsume(rx(i))) return false;
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      if (!fifoCanProduce(tx(i))) return false;
    if (nr > 0 && coop_.callSignatureHash() != 0) checkSignatures(nr);
    return true;
  }

  // Every step received must belong to this call (device/signature.h); a
  // step of another call is recorded on the team, whose wait then fails.
  WEFT_HD void checkSignatures(int nr) {
    const uint32_t ours = coop_.callSignatureHash();
    for (int i = 0; i < kMaxRecv && i < nr; ++i) checkStepSignature(coop_, rx(i), ours, channel_);
  }

  // The first peer not ready: whom a timeout blames.
  WEFT_HD WaitSite culprit(int nr, int ns) {
    for (int i = 0; i < kMaxRecv && i < nr; ++i)
      if (!fifoCanConsume(rx(i))) return WaitSite{rx(i).peer, 0, channel_};
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      if (!fifoCanProduce(tx(i))) return WaitSite{tx(i).peer, 1, channel_};
    return WaitSite{-1, 0, channel_};
  }

  // ownAt: where the own input goes among the sources (the peers' slots fill
  // the other positions in fan order); reductions run in source order.
  // DirectRecv / DirectSend: the verb may take its input from (or write its
  // output to) user buffers on links in direct mode; both need Dst, whose
  // offset from ownBase_ locates the peer's position. ReadSend: links within
  // the process get no data, only where it lies (directReadSend).
  template <bool Recv, bool Send, bool Src, bool Dst, bool DirectRecv = false, bool DirectSend = false,
            bool ReadSend = false>
  WEFT_HD void genericOp(const T* src, T* dst, int64_t nelem, bool pre, bool post, int ownAt = 0) {
    static_assert(Dst || !(DirectRecv || DirectSend), "direct verbs locate the peer's data by their output");
    const int nr = Recv ? nRecv_ : 0;
    const int ns = Send ? nSend_ : 0;
    for (int64_t offset = 0; offset < nelem; offset += stepElems_) {
      const int64_t n = minOf(stepElems_, nelem - offset);
      const bool ok = coop_.waitUntil([&] { return ready(nr, ns); }, [&] { return culprit(nr, ns); });
      if (ok) {
        const T* srcs[kMaxSrcs] = {};
        T* dsts[kMaxDsts] = {};
        int nSrcs = 0;
        int nDsts = 0;
        const int ownPos = Src ? minOf(ownAt, nr) : -1;
        for (int i = 0; i < kMaxRecv && i < nr; ++i) {
          if (i == ownPos) srcs[nSrcs++] = src + offset;
          // A direct receive found its data already in place at dst.
          srcs[nSrcs++] = DirectRecv && recvIsDirect(i) ? dst + offset : recvSource(i);
        }
        if (Src && ownPos == nr) srcs[nSrcs++] = src + offset;
        if (Dst) dsts[nDsts++] = dst + offset;
        for (int i = 0; i < kMaxSend && i < ns; ++i) {
          readFrom_[i] = 0;
          if (ReadSend && (tx(i).reach == kReachAddress || readOk_[i])) {
            readFrom_[i] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(src + offset));
            sentDirect_[i] = false;
            continue;  // nothing to write for this peer
          }
          const DirectWay way = DirectSend ? sendWay(i) : DirectWay::kSlot;
          sentDirect_[i] = way != DirectWay::kSlot;
          if (way == DirectWay::kPointer)
            dsts[nDsts++] = reinterpret_cast<T*>(static_cast<uintptr_t>(peerAddr_[i])) + (dst + offset - ownBase_);
          else if (way == DirectWay::kCrossMemory)
            dsts[nDsts++] = dst + offset;  // the own output once more: the kernel copies it from there
          else
            dsts[nDsts++] = reinterpret_cast<T*>(fifoSlot(tx(i)));
        }
        if (!ReadSend || nDsts > 0)
          reduceCopy<kVerbMinSrcs<Recv, Src>, kVerbMaxSrcs<Recv, Src>, kVerbMinDsts<Send, Dst>,
                     kVerbMaxDsts<Send, Dst>>(coop_, op_, srcs, nSrcs, dsts, nDsts, n, Src && pre ? ownPos : -1, post);
        if constexpr (DirectSend && Coop::kHasDirect) crossMemorySends(dst + offset, n, ns);
        coop_.sync();
      }
      advance(nr, ns, n * static_cast<int64_t>(sizeof(T)), ok);
    }
  }

  // Cross-memory sends of one slice: the kernel copies the own output (just
  // written) into the peer's buffer; where it refuses, the slice goes
  // through the slot after all and the rest of the call too. The leader
  // copies once the whole team has written the slice, and its refusals
  // become every thread's (each thread picks its own outputs by way_).
  // Every thread holds the same ways (beginDirect), so all take the barriers.
  WEFT_HD void crossMemorySends(const T* out, int64_t n, int ns) {
    bool any = false;
    for (int i = 0; i < kMaxSend && i < ns; ++i) any = any || sendWay(i) == DirectWay::kCrossMemory;
    if (!any) return;
    coop_.sync();
    int refused = 0;
    if (coop_.leader()) {
      for (int i = 0; i < kMaxSend && i < ns; ++i) {
        if (sendWay(i) != DirectWay::kCrossMemory) continue;
        const uint64_t remote = peerAddr_[i] + static_cast<uint64_t>(out - ownBase_) * sizeof(T);
        if (!coop_.crossWrite(tx(i).peer, out, remote, fifoSlot(tx(i)), static_cast<uint64_t>(n) * sizeof(T)))
          refused |= 1 << i;
      }
    }
    refused = coop_.broadcastFromLeader(refused);
    for (int i = 0; i < kMaxSend && i < ns; ++i) {
      if ((refused & (1 << i)) == 0) continue;
      sentDirect_[i] = false;
      way_[i] = DirectWay::kSlot;
    }
  }

  // Between processes every step says where its data is (before the
  // release of tail in fifoPublish), direct calls or not.
  WEFT_HD static void markStep(FifoEnd& end, bool direct) {
    if (end.reach != kReachShared) return;
    storeRelaxed(&fifoControl(end)->directStep[end.step % kFifoSteps], static_cast<uint8_t>(direct ? 1 : 0));
  }

  // In a direct call every step on a link with a mailbox says where its data
  // lies (0: the slot), before the release of tail in fifoPublish.
  WEFT_HD void nameReadFrom(FifoEnd& end, uint64_t at) {
    if (!direct_ || end.reach == kReachNone) return;
    storeRelaxed(&fifoControl(end)->readFrom[end.step % kFifoSteps], at);
    if (at != 0) end.directReads += 1;
  }

  // Every thread moves its copy of the positions; only the leader touches the
  // shared counters, after the team's writes are fenced (see the Coop).
  WEFT_HD void advance(int nr, int ns, int64_t bytes, bool publish) {
    if (publish && coop_.leader()) {
      coop_.publishFence();
      const uint32_t hash = coop_.callSignatureHash();
      for (int i = 0; i < kMaxSend && i < ns; ++i) {
        if (hash != 0) fifoSign(tx(i), coop_.callSignature(), hash);
        if constexpr (Coop::kHasDirect) markStep(tx(i), sentDirect_[i]);
        if constexpr (Coop::kHasDirectRead) nameReadFrom(tx(i), readFrom_[i]);
        fifoPublish(tx(i), bytes);
      }
      for (int i = 0; i < kMaxRecv && i < nr; ++i) fifoRelease(rx(i));
      return;
    }
    for (int i = 0; i < kMaxSend && i < ns; ++i) tx(i).step += 1;
    for (int i = 0; i < kMaxRecv && i < nr; ++i) rx(i).step += 1;
  }

  // This thread's view of receive link i and send link i (see the constructor).
  WEFT_HD FifoEnd& rx(int i) { return kInPlace ? *recvOrig_[i] : recvCopy_[i]; }
  WEFT_HD const FifoEnd& rx(int i) const { return kInPlace ? *recvOrig_[i] : recvCopy_[i]; }
  WEFT_HD FifoEnd& tx(int i) { return kInPlace ? *sendOrig_[i] : sendCopy_[i]; }
  WEFT_HD const FifoEnd& tx(int i) const { return kInPlace ? *sendOrig_[i] : sendCopy_[i]; }

  Coop& coop_;
  RedOp op_;
  int channel_;
  int nRecv_;
  int nSend_;
  int64_t stepElems_ = 0;
  bool direct_ = false;
  bool readAllowed_ = false;
  T* ownBase_ = nullptr;
  // Per send link in a direct call: how it writes, and where (a pointer in
  // this address space, or the peer's address for cross-memory writes).
  DirectWay way_[kMaxSend > 0 ? kMaxSend : 1] = {};
  bool resolved_[kMaxSend > 0 ? kMaxSend : 1] = {};
  bool sentDirect_[kMaxSend > 0 ? kMaxSend : 1] = {};
  uint64_t peerAddr_[kMaxSend > 0 ? kMaxSend : 1] = {};
  // Per send link, the step's data in this rank's input for the consumer to
  // read in place (directReadSend), or 0.
  uint64_t readFrom_[kMaxSend > 0 ? kMaxSend : 1] = {};
  // Direct reads between processes in this call (beginReads): whether it
  // carries the handshake; per send link whether the consumer mapped this
  // rank's input (readOk_) or is yet to answer (readPending_); per receive
  // link whether the producer's post is answered and where its input lies.
  bool readPosts_ = false;
  bool readOk_[kMaxSend > 0 ? kMaxSend : 1] = {};
  bool readPending_[kMaxSend > 0 ? kMaxSend : 1] = {};
  bool readAnswered_[kMaxRecv > 0 ? kMaxRecv : 1] = {};
  ReadMap readMap_[kMaxRecv > 0 ? kMaxRecv : 1] = {};
  // The working copies of a team of several threads (unused in place).
  FifoEnd recvCopy_[kInPlace ? 1 : (kMaxRecv > 0 ? kMaxRecv : 1)];
  FifoEnd sendCopy_[kInPlace ? 1 : (kMaxSend > 0 ? kMaxSend : 1)];
  FifoEnd* recvOrig_[kMaxRecv > 0 ? kMaxRecv : 1];
  FifoEnd* sendOrig_[kMaxSend > 0 ? kMaxSend : 1];
};

}  // namespace weft::device
