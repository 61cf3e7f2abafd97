// Ring orders for channels when no topology search applies (the host
// backend's flat case). Pure: takes counts, returns orders.
#pragma once

#include <vector>

namespace weft::graph {

// One ring per channel, each a permutation of 0..nranks-1 listed in ring
// order. Even channels run in rank order and odd channels in reverse, so a
// pair of channels uses every link in both directions.
std::vector<std::vector<int>> flatRings(int nranks, int nchannels);

}  // namespace weft::graph
