// The 2D torus's grid (device/torus.h): the ranks of each row. Pure: rank
// counts, nodes and links in, rows out.
//   WEFT_TORUS=RxC   R rows of C consecutive ranks;
//   else             nodes of one size, 2 or more of 2 or more ranks: a row
//                    per node (rows = nodes, columns = ranks per node);
//   else             the most square R x C = nranks with 2 <= R <= C.
// A rank count without such a shape (a prime, or fewer than 4 ranks) has no
// derived grid; WEFT_TORUS can still ask for a 1 x N or N x 1 one (a ring).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/broken_links.h"

namespace weft::core {

struct TorusGrid {
  std::vector<std::vector<int>> rows;  // empty: no grid
  std::string source;                  // how the shape was found, or why there is none
};

// "RxC" (also "R*C", "RXC") with R * C == nranks; errors name WEFT_TORUS,
// the text and what was expected.
Result<TorusGrid> parseTorusShape(const std::string& text, int nranks);

// The grid for `nranks` ranks in `nodes` (the communicator's nodes, in
// order): from `text` (WEFT_TORUS) when set, else derived as above.
Result<TorusGrid> torusGrid(const std::string& text, int nranks, const std::vector<std::vector<int>>& nodes);

// The torus plan (rows as the hierarchical ring's nodes) when no broken link
// lies on a row or column ring; null, with *why set, otherwise.
std::shared_ptr<const HierPlan> planTorus(const TorusGrid& grid, const LinkSet& broken, std::string* why);

}  // namespace weft::core
