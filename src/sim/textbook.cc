#include "sim/textbook.h"

namespace weft::sim {
namespace {

int largestPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

int log2Of(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}

int phaseOf(int round) { return round < kMaxPhases - 1 ? round : kMaxPhases - 1; }

}  // namespace

// Connections shared by the butterfly and halving-doubling: folds and one
// per (round, rank) to its partner.
template <typename Add>
static void foldAndExchange(int nranks, int pow2, int rounds, int window, Add add, std::vector<int32_t>* foldIn,
                            std::vector<int32_t>* foldOut, std::vector<int32_t>* exchange) {
  exchange->reserve(static_cast<size_t>(rounds) * static_cast<size_t>(pow2));
  for (int e = pow2; e < nranks; ++e) {
    foldIn->push_back(add(e, e - pow2, 0, window));
    foldOut->push_back(add(e - pow2, e, phaseOf(rounds + 1), window));
  }
  exchange->resize(static_cast<size_t>(rounds) * static_cast<size_t>(pow2));
  for (int i = 0; i < rounds; ++i)
    for (int r = 0; r < pow2; ++r)
      (*exchange)[static_cast<size_t>(i) * pow2 + r] = add(r, r ^ (1 << i), phaseOf(1 + i), window);
}

ButterflySchedule::ButterflySchedule(int nranks, double bytes)
    : nranks_(nranks), pow2_(largestPow2(nranks)), rounds_(log2Of(pow2_)), bytes_(bytes), stage_(nranks, 0) {
  auto add = [this](int from, int to, int phase, int window) {
    return addConnection(from, to, Flow{from, to, from, phase}, window);
  };
  reserveConnections(static_cast<size_t>(rounds_) * pow2_ + 2 * static_cast<size_t>(nranks - pow2_));
  foldAndExchange(nranks_, pow2_, rounds_, 1, add, &foldIn_, &foldOut_, &exchange_);
}

// Stages: 0 fold in, 1 .. 2 rounds (send, then receive and combine), then fold out.
bool ButterflySchedule::next(int actor, Op* op) {
  int& s = stage_[static_cast<size_t>(actor)];
  op->bytes = bytes_;
  if (actor >= pow2_) {  // an extra rank: hand over, get the result back
    if (s == 0) addSend(op, foldIn_[static_cast<size_t>(actor - pow2_)]);
    if (s == 1) addRecv(op, foldOut_[static_cast<size_t>(actor - pow2_)]);
    return s++ < 2;
  }
  const bool extra = actor + pow2_ < nranks_;
  const int last = 2 * rounds_ + 1;
  while (s <= last) {
    const int stage = s++;
    if (stage == 0 || stage == last) {
      if (!extra) continue;
      if (stage == 0) addRecv(op, foldIn_[static_cast<size_t>(actor)]);
      if (stage == 0) op->reduceBytes = bytes_;
      if (stage == last) addSend(op, foldOut_[static_cast<size_t>(actor)]);
      return true;
    }
    const int round = (stage - 1) / 2;
    const size_t row = static_cast<size_t>(round) * pow2_;
    if ((stage - 1) % 2 == 0) {
      addSend(op, exchange_[row + actor]);
    } else {
      addRecv(op, exchange_[row + (actor ^ (1 << round))]);
      op->reduceBytes = bytes_;
    }
    return true;
  }
  return false;
}

HalvingDoublingSchedule::HalvingDoublingSchedule(int nranks, double bytes)
    : nranks_(nranks), pow2_(largestPow2(nranks)), rounds_(log2Of(pow2_)), bytes_(bytes), stage_(nranks, 0) {
  auto add = [this](int from, int to, int phase, int window) {
    return addConnection(from, to, Flow{from, to, from, phase}, window);
  };
  reserveConnections(static_cast<size_t>(rounds_) * pow2_ + 2 * static_cast<size_t>(nranks - pow2_));
  foldAndExchange(nranks_, pow2_, rounds_, 2, add, &foldIn_, &foldOut_, &exchange_);
}

// Stages: 0 fold in; reduce-scatter rounds 0..L-1 (2 ops each, S/2^(i+1));
// allgather rounds L-1..0 (2 ops each); fold out.
bool HalvingDoublingSchedule::next(int actor, Op* op) {
  int& s = stage_[static_cast<size_t>(actor)];
  op->bytes = bytes_;
  if (actor >= pow2_) {
    if (s == 0) addSend(op, foldIn_[static_cast<size_t>(actor - pow2_)]);
    if (s == 1) addRecv(op, foldOut_[static_cast<size_t>(actor - pow2_)]);
    return s++ < 2;
  }
  const bool extra = actor + pow2_ < nranks_;
  const int last = 4 * rounds_ + 1;
  while (s <= last) {
    const int stage = s++;
    if (stage == 0 || stage == last) {
      if (!extra) continue;
      if (stage == 0) addRecv(op, foldIn_[static_cast<size_t>(actor)]);
      if (stage == 0) op->reduceBytes = bytes_;
      if (stage == last) addSend(op, foldOut_[static_cast<size_t>(actor)]);
      return true;
    }
    const int step = (stage - 1) / 2;
    const bool scatter = step < rounds_;
    const int round = scatter ? step : 2 * rounds_ - 1 - step;
    op->bytes = bytes_ / static_cast<double>(2 << round);
    const size_t row = static_cast<size_t>(round) * pow2_;
    if ((stage - 1) % 2 == 0) {
      addSend(op, exchange_[row + actor]);
    } else {
      addRecv(op, exchange_[row + (actor ^ (1 << round))]);
      if (scatter) op->reduceBytes = op->bytes;
    }
    return true;
  }
  return false;
}

TorusSchedule::TorusSchedule(int rows, int cols, double bytes, int actors, int ranksPerNode)
    : rows_(rows), cols_(cols), actors_(actors), bytes_(bytes), stage_(actors, 0) {
  auto rowNext = [&](int r) { return r / cols_ * cols_ + (r % cols_ + 1) % cols_; };
  auto colNext = [&](int r) { return (r + cols_) % (rows_ * cols_); };
  auto add = [&](int from, int to, int phase) {
    const int rail = from % ranksPerNode;
    return addConnection(from, to % actors_, Flow{from, to, rail, phase}, kWeftFifoSlots);
  };
  reserveConnections(3 * static_cast<size_t>(actors_));
  for (int a = 0; a < actors_; ++a) {
    rowScatter_.push_back(add(a, rowNext(a), 0));
    column_.push_back(add(a, colNext(a), 1));
    rowGather_.push_back(add(a, rowNext(a), 2));
  }
  // What actor a receives on: its predecessor's outgoing connection (in
  // node-periodic mode the predecessor's stand-in, which sends to a).
  auto rowPrev = [&](int r) { return r / cols_ * cols_ + (r % cols_ + cols_ - 1) % cols_; };
  auto colPrev = [&](int r) { return (r - cols_ + rows_ * cols_) % (rows_ * cols_); };
  for (int a = 0; a < actors_; ++a) {
    rowScatterIn_.push_back(rowScatter_[static_cast<size_t>(rowPrev(a) % actors_)]);
    columnIn_.push_back(column_[static_cast<size_t>(colPrev(a) % actors_)]);
    rowGatherIn_.push_back(rowGather_[static_cast<size_t>(rowPrev(a) % actors_)]);
  }
}

// Stages, two ops per ring step (send, then receive): cols-1 reduce-scatter
// steps, 2(rows-1) column steps (the first rows-1 combine), cols-1 allgather steps.
bool TorusSchedule::next(int actor, Op* op) {
  const size_t a = static_cast<size_t>(actor);
  int& s = stage_[a];
  const int scatterOps = 2 * (cols_ - 1), columnOps = 4 * (rows_ - 1);
  const int stage = s++;
  const bool sending = stage % 2 == 0;
  if (stage < scatterOps) {
    op->bytes = bytes_ / cols_;
    sending ? addSend(op, rowScatter_[a]) : addRecv(op, rowScatterIn_[a]);
    if (!sending) op->reduceBytes = op->bytes;
    return true;
  }
  if (stage < scatterOps + columnOps) {
    const int step = (stage - scatterOps) / 2;
    op->bytes = bytes_ / cols_ / rows_;
    sending ? addSend(op, column_[a]) : addRecv(op, columnIn_[a]);
    if (!sending && step < rows_ - 1) op->reduceBytes = op->bytes;
    return true;
  }
  if (stage < 2 * scatterOps + columnOps) {
    op->bytes = bytes_ / cols_;
    sending ? addSend(op, rowGather_[a]) : addRecv(op, rowGatherIn_[a]);
    return true;
  }
  return false;
}

}  // namespace weft::sim
