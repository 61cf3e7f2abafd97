// The bootstrap root: collects one Hello per rank, checks them, and tells
// each rank the address of the next one, from which the ranks build their
// own ring. Serves one communicator, then exits. If ranks are missing when
// the timeout expires, the ranks that did arrive are told which are missing.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/params.h"
#include "core/bootstrap_wire.h"
#include "core/unique_id.h"

namespace weft::core {
namespace {

struct Arrival {
  Socket socket;
  wire::Hello hello;
};

void replyAll(std::vector<Arrival>& arrivals, const std::string& error) {
  for (Arrival& a : arrivals) {
    wire::Welcome welcome{};
    welcome.status = error.empty() ? 0 : 1;
    std::snprintf(welcome.message, sizeof(welcome.message), "%s", error.c_str());
    if (error.empty()) {
      int next = (a.hello.rank + 1) % a.hello.nranks;
      for (const Arrival& b : arrivals)
        if (b.hello.rank == next) welcome.next = b.hello.listen;
    }
    (void)a.socket.sendAll(&welcome, sizeof(welcome), Deadline::afterSec(10));
  }
}

std::string missingRanks(const std::vector<Arrival>& arrivals, int nranks) {
  std::vector<bool> seen(static_cast<size_t>(std::max(nranks, 0)), false);
  for (const Arrival& a : arrivals) seen[static_cast<size_t>(a.hello.rank)] = true;
  std::string out;
  int listed = 0;
  for (int r = 0; r < nranks; ++r) {
    if (seen[static_cast<size_t>(r)]) continue;
    if (listed++ == 16) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + std::to_string(r);
  }
  return out;
}

// Checks one Hello against what came before; returns an error text or "".
std::string checkHello(const wire::Hello& hello, const std::vector<Arrival>& arrivals, int nranks) {
  if (hello.nranks != nranks)
    return strFormat("rank %d called init with nranks=%d but rank %d with nranks=%d", hello.rank, hello.nranks,
                     arrivals[0].hello.rank, nranks);
  if (hello.rank < 0 || hello.rank >= nranks) return strFormat("rank %d is outside 0..%d", hello.rank, nranks - 1);
  for (const Arrival& a : arrivals)
    if (a.hello.rank == hello.rank) return strFormat("two ranks called init with rank=%d", hello.rank);
  return "";
}

void serve(Socket listen, uint64_t secret) {
  const int64_t timeoutSec = param::bootstrapTimeoutSec();
  Deadline deadline = Deadline::afterSec(timeoutSec);
  std::vector<Arrival> arrivals;
  int nranks = -1;
  std::string error;
  while (error.empty() && (nranks < 0 || static_cast<int>(arrivals.size()) < nranks)) {
    Result<Socket> conn = listen.accept(deadline);
    if (!conn.ok()) {
      error = strFormat(
          "only %zu of %d ranks reached the bootstrap root at %s within %lld s (WEFT_BOOTSTRAP_TIMEOUT); "
          "missing ranks: %s",
          arrivals.size(), nranks, listen.localAddress().toString().c_str(), static_cast<long long>(timeoutSec),
          missingRanks(arrivals, nranks).c_str());
      break;
    }
    wire::Hello hello{};
    if (!conn.value().recvAll(&hello, sizeof(hello), Deadline::afterSec(10)).ok() || hello.magic != wire::kHelloMagic ||
        hello.secret != secret) {
      WEFT_WARN("bootstrap root %s: dropped a connection that did not present this id's secret",
                listen.localAddress().toString().c_str());
      continue;
    }
    if (nranks < 0) nranks = hello.nranks;
    error = checkHello(hello, arrivals, nranks);
    arrivals.push_back(Arrival{std::move(conn).value(), hello});
  }
  if (!error.empty()) WEFT_WARN("bootstrap root: %s", error.c_str());
  replyAll(arrivals, error);
  WEFT_INFO(log::kBootstrap, "bootstrap root %s served %zu ranks", listen.localAddress().toString().c_str(),
            arrivals.size());
}

}  // namespace

void startRoot(Socket listen, uint64_t secret) { std::thread(serve, std::move(listen), secret).detach(); }

}  // namespace weft::core
