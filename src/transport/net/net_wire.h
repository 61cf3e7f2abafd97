// What a network link puts on the wire for one FIFO step: the slot's payload
// followed by a trailer that carries the call signature the producer wrote
// in its FIFO's control page (device/signature.h), in the same message.
//
// The receiving proxy writes the trailer's words into its own FIFO's control
// page before it publishes the step, so the consumer checks steps that
// crossed the network exactly as it checks steps from a local peer. One
// message per step keeps the cost at 24 bytes, not a second send; every
// plugin version can carry it, since a receive may be posted larger than the
// message and reports the size that arrived.
//
// Room: the trailer lands right after the payload, which may fill the whole
// slot, so network FIFOs space their slots kNetSlotGap bytes apart
// (FifoEnd::slotGap); the data path never touches the gap. The trailer is
// sent whether or not WEFT_CHECK_CALLS is on (unsigned steps carry zeros):
// both ends then agree on the format whatever each one's setting.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/step_fifo.h"

namespace weft::transport {

struct NetStepTrailer {
  uint64_t word;   // CallSignature::word (0: the step is not signed)
  uint64_t count;  // CallSignature::count
  uint32_t hash;   // callHash() as the producer wrote it
  uint32_t magic;  // kNetTrailerMagic: the peer speaks this format
};

constexpr uint32_t kNetTrailerMagic = 0x57534947u;  // "WSIG"
constexpr int64_t kNetTrailerBytes = sizeof(NetStepTrailer);
// The gap keeps slots 128-byte aligned when stepBytes is a multiple of 128.
constexpr int64_t kNetSlotGap = 128;
static_assert(kNetTrailerBytes == 24 && kNetTrailerBytes <= kNetSlotGap, "the trailer must fit the slot gap");

// The trailer of the step in `slot` of a FIFO whose control page is
// `control`. The payload's end is not aligned: copy, never cast.
inline void writeNetTrailer(const device::FifoControl& control, uint64_t slot, char* at) {
  const NetStepTrailer t{device::loadRelaxed(&control.sigs[slot][0]), device::loadRelaxed(&control.sigs[slot][1]),
                         device::loadRelaxed(&control.sigHash[slot]), kNetTrailerMagic};
  std::memcpy(at, &t, sizeof(t));
}

// Reads a received trailer into the control page; false if it is not one.
inline bool applyNetTrailer(const char* at, uint64_t slot, device::FifoControl* control) {
  NetStepTrailer t;
  std::memcpy(&t, at, sizeof(t));
  if (t.magic != kNetTrailerMagic) return false;
  device::storeRelaxed(&control->sigs[slot][0], t.word);
  device::storeRelaxed(&control->sigs[slot][1], t.count);
  device::storeRelaxed(&control->sigHash[slot], t.hash);
  return true;
}

}  // namespace weft::transport
