// 2D torus AllReduce: ranks on a grid of R rows x C columns (core/torus_grid.h).
//   1. reduce-scatter around the row's ring: column c ends with segment c
//      of the data reduced over its row;
//   2. allreduce of segment c around the column's ring (R ranks, C such
//      rings in parallel);
//   3. allgather around the row's ring.
// This is the hierarchical ring's schedule (hier_ring.h) with rows in the
// place of nodes, on a grid the user or the rank count chooses rather than
// the hosts: 2(R + C - 2) hand-offs instead of the flat ring's 2(RC - 1),
// for the same bytes per rank, 2 S (RC - 1)/(RC).
// A grid of one row or one column is a single ring: it runs as the ring
// AllReduce over that row or column, with the user's functor whole.
#pragma once

#include "device/hier_ring.h"
#include "device/portable.h"
#include "device/ring.h"
#include "device/work.h"

namespace weft::device {

// Whether the grid is one row or one column (a ring).
WEFT_HD bool torusIsLine(const HierView& t) { return t.nodes == 1 || t.perNode == 1; }

// The line's ring: the row's when the grid is one row, else the column's.
WEFT_HD RingView torusLineRing(const HierView& t) {
  return t.nodes == 1 ? RingView{t.perNode, t.local, -1, -1, nullptr} : RingView{t.nodes, t.node, -1, -1, nullptr};
}
WEFT_HD FifoEnd* torusLineRecv(const HierView& t) { return t.nodes == 1 ? t.intraRecv : t.interRecv; }
WEFT_HD FifoEnd* torusLineSend(const HierView& t) { return t.nodes == 1 ? t.intraSend : t.interSend; }

// Row primitives carry the user's functor, column primitives the functor
// without its pre-op (they combine partial results, as in hier_ring.h).
template <typename T, typename RowPrims, typename ColumnPrims>
WEFT_HD void torusAllReduce(RowPrims& row, ColumnPrims& column, const HierView& t, const CollWork& work) {
  hierRingAllReduce<T>(row, column, t, work);
}

// A one-row or one-column grid, with primitives over torusLineRecv/Send.
template <typename T, typename LinePrims>
WEFT_HD void torusLineAllReduce(LinePrims& line, const HierView& t, const CollWork& work) {
  ringAllReduce<T>(line, torusLineRing(t), work);
}

}  // namespace weft::device
