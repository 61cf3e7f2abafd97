#include "graph/rings.h"

#include <cstddef>

namespace weft::graph {

std::vector<std::vector<int>> flatRings(int nranks, int nchannels) {
  std::vector<std::vector<int>> rings(static_cast<size_t>(nchannels));
  for (int c = 0; c < nchannels; ++c) {
    std::vector<int>& ring = rings[static_cast<size_t>(c)];
    ring.reserve(static_cast<size_t>(nranks));
    for (int i = 0; i < nranks; ++i) ring.push_back(c % 2 == 0 ? i : (nranks - i) % nranks);
  }
  return rings;
}

}  // namespace weft::graph
