// How many channels a host's rings need to saturate its links, and what
// each channel may carry, derived from the topology the way NCCL sizes its
// ring graph, so that Weft's log and NCCL's compare line by line:
//
//  1. Speeds: NCCL's per-channel speed list for the slowest GPU's
//     generation (sm_90 and sm_100 have their own lists; single-host and
//     multi-host lists differ), from the widest GPU-to-GPU path down.
//  2. At each speed, how many closed rings the links carry: rings are laid
//     on the searched cycles in turn, each hop taking the speed from every
//     directed link of its path (an NVSwitch GPU's link carries 370.8 / 60
//     = 6 rings at 60 GB/s; a four-GPU NVLink mesh spreads rings over its six
//     directed cycles); when the fastest cycles are full, slower NVLink
//     cycles take rings where their links have room (a DGX-1's single-link
//     cycles next to its double-link one, as NCCL fills all six NVLinks of
//     each V100); across hosts also one rail's NIC per channel. The
//     speed that moves the most in total wins (the faster on a tie), at
//     most 16 rings.
//  3. Search channels = that count, doubled with the speed halved when one
//     channel would be too fast for one SM to drive (NCCL's rule: from
//     25 GB/s, except on sm_90+ from 5 channels below 50 GB/s). This is the
//     "nChannels N, bw A/B" NCCL's GRAPH log prints, and the ring graph of
//     NCCL_GRAPH_DUMP_FILE.
//  4. Communicator channels = twice the search channels (each ring runs on
//     two channels, as in NCCL), doubled again on sm_90+ across hosts when
//     one channel moves more than 45 GB/s and there are fewer than 16; then
//     at most NCCL_MAX_NCHANNELS and at least NCCL_MIN_NCHANNELS. This is
//     the `yy` of NCCL's `Channel xx/yy` lines.
#pragma once

#include "graph/search.h"

namespace weft::graph {

struct ChannelBudget {
  double capacity = 0;     // GB/s per direction the rings can move (1.)
  double ringSpeed = 0;    // the speed the rings were packed at (2.; SearchOptions::ringSpeed)
  int searchChannels = 0;  // NCCL's ring-graph nChannels (3.)
  double bwIntra = 0;      // per search channel within the host, GB/s
  double bwInter = 0;      // per search channel across hosts (= bwIntra on one host)
  int channels = 0;        // communicator channels (4.)
  int wanted = 0;          // (4.) before NCCL_MIN/MAX_NCHANNELS
};

// `search` is a search of `host` (its cycles are the rings'); `nnodes` the
// hosts of the communicator; channels are clamped to [minChannels,
// maxChannels].
ChannelBudget channelBudget(const Topology& host, const RingSearch& search, int nnodes, int minChannels,
                            int maxChannels);

}  // namespace weft::graph
