// Tuning: how many channels and how large a chunk an operation gets. Pure
// functions of narrow inputs, so they can be tested and replaced alone.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::tuning {

struct ChannelLimits {
  int minChannels;  // >= 1
  int maxChannels;  // >= minChannels, <= channels the communicator built
};

// Bytes of data each channel should have at least before another channel is
// worth its start-up cost, by the built-in figures (TuningFigures::
// bytesPerChannel: a channel's start-up over the copy bandwidth).
constexpr int64_t kBytesPerChannel = 256 * 1024;

// Channels for a collective moving `bytes` in total (the user buffer size):
// one per `bytesPerChannel` started, within the limits.
int collChannels(int64_t bytes, const ChannelLimits& limits, int64_t bytesPerChannel = kBytesPerChannel);

// Default highest channel count on the cuda backend.
constexpr int kCudaDefaultMaxChannels = 16;

// Default highest channel count on the host backend: one per core available
// to each local rank, at least 1 and at most 4.
int hostDefaultMaxChannels(int cores, int localRanks);

// FIFO buffer bytes per connection: NCCL_BUFFSIZE when set (rounded down to
// a multiple of `granule`, the FIFO's step count times its alignment), else
// the backend default.
int64_t buffSize(int64_t requested, bool hostBackend, int64_t granule);

}  // namespace weft::tuning
