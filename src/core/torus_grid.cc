#include "core/torus_grid.h"

#include <algorithm>
#include <cstdlib>

#include "common/log.h"

namespace weft::core {
namespace {

bool parseCount(const std::string& text, int* value) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *value = std::atoi(text.c_str());
  return *value > 0;
}

// R rows of C consecutive ranks.
std::vector<std::vector<int>> consecutiveRows(int rows, int cols) {
  std::vector<std::vector<int>> out(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[static_cast<size_t>(r)].push_back(r * cols + c);
  return out;
}

bool equalNodes(const std::vector<std::vector<int>>& nodes) {
  return nodes.size() >= 2 && nodes[0].size() >= 2 &&
         std::all_of(nodes.begin(), nodes.end(), [&](const auto& n) { return n.size() == nodes[0].size(); });
}

}  // namespace

Result<TorusGrid> parseTorusShape(const std::string& text, int nranks) {
  const size_t x = text.find_first_of("xX*");
  int rows = 0, cols = 0;
  if (x == std::string::npos || !parseCount(text.substr(0, x), &rows) || !parseCount(text.substr(x + 1), &cols))
    return errorStatus(ncclInvalidArgument,
                       "WEFT_TORUS=\"%s\" is not a grid shape: expected ROWSxCOLUMNS with ROWS * COLUMNS = %d (the "
                       "rank count), e.g. 2x%d",
                       text.c_str(), nranks, std::max(1, nranks / 2));
  if (static_cast<long long>(rows) * cols != nranks)
    return errorStatus(ncclInvalidArgument,
                       "WEFT_TORUS=\"%s\": %d x %d = %lld ranks, but the communicator has %d; expected ROWSxCOLUMNS "
                       "with ROWS * COLUMNS = %d",
                       text.c_str(), rows, cols, static_cast<long long>(rows) * cols, nranks, nranks);
  return TorusGrid{consecutiveRows(rows, cols), strFormat("WEFT_TORUS=%s", text.c_str())};
}

Result<TorusGrid> torusGrid(const std::string& text, int nranks, const std::vector<std::vector<int>>& nodes) {
  if (!text.empty()) return parseTorusShape(text, nranks);
  if (equalNodes(nodes))
    return TorusGrid{nodes, strFormat("%zu nodes x %zu ranks per node", nodes.size(), nodes[0].size())};
  int rows = 1;
  for (int r = 2; r * r <= nranks; ++r)
    if (nranks % r == 0) rows = r;
  if (rows < 2) return TorusGrid{{}, strFormat("%d ranks have no grid of 2 or more rows and columns", nranks)};
  return TorusGrid{consecutiveRows(rows, nranks / rows), "the most square factorisation"};
}

std::shared_ptr<const HierPlan> planTorus(const TorusGrid& grid, const LinkSet& broken, std::string* why) {
  if (grid.rows.empty()) {
    *why = grid.source;
    return nullptr;
  }
  const size_t ranks = grid.rows.size() * grid.rows[0].size();
  if (ranks < 2) {
    *why = "one rank";
    return nullptr;
  }
  auto plan = std::make_shared<HierPlan>();
  plan->nodes = grid.rows;
  for (const auto& row : grid.rows)
    for (int rank : row) {
      const HierPlan::Place p = plan->placeOf(rank);
      for (int next : {p.intraNext, p.interNext})
        if (next != rank && broken.has(rank, next)) {
          *why = strFormat("link %d-%d, on its rings, is broken", std::min(rank, next), std::max(rank, next));
          return nullptr;
        }
    }
  return plan;
}

}  // namespace weft::core
