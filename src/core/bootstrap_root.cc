// The bootstrap root: collects one Hello per rank, checks them, and tells
// each rank the address of the next one, from which the ranks build their
// own ring. Serves one communicator, then exits. If ranks are missing when
// the timeout expires, the ranks that did arrive are told which are missing.
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/params.h"
#include "core/bootstrap_wire.h"
#include "core/hello_gate.h"
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
      int prev = (a.hello.rank + a.hello.nranks - 1) % a.hello.nranks;
      for (const Arrival& b : arrivals) {
        if (b.hello.rank == next) welcome.next = b.hello.listen;
        if (b.hello.rank == prev) welcome.prev = b.hello.listen;
      }
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

// Hellos are read by the gate, many at once: a stranger or an idle
// connection never delays a real rank (hello_gate.h).
void serve(Socket listen, uint64_t secret) {
  const int64_t timeoutSec = param::bootstrapTimeoutSec();
  const Deadline deadline = Deadline::afterSec(timeoutSec);
  const std::string name = strFormat("bootstrap root %s", listen.localAddress().toString().c_str());
  HelloGate gate(name, sizeof(wire::Hello), [secret](const void* bytes) {
    wire::Hello h;
    std::memcpy(&h, bytes, sizeof(h));
    return h.magic == wire::kHelloMagic && h.secret == secret;
  });
  std::vector<Arrival> arrivals;
  std::vector<pollfd> fds;
  std::vector<HelloGate::Arrival> arrived;
  int nranks = -1;
  std::string error;
  while (error.empty() && (nranks < 0 || static_cast<int>(arrivals.size()) < nranks)) {
    if (deadline.expired()) {
      error = strFormat(
          "only %zu of %d ranks reached the %s within %lld s (WEFT_BOOTSTRAP_TIMEOUT); missing ranks: %s%s",
          arrivals.size(), nranks, name.c_str(), static_cast<long long>(timeoutSec),
          missingRanks(arrivals, nranks).c_str(),
          gate.strangers() > 0 ? strFormat(" (%llu other connections were not ranks of this id and were closed)",
                                           static_cast<unsigned long long>(gate.strangers()))
                                     .c_str()
                               : "");
      break;
    }
    fds.clear();
    gate.addPollFds(listen, &fds);
    const int gateMs = gate.msUntilNextDeadline();
    const int leftMs = deadline.remainingMsForPoll();
    (void)::poll(fds.data(), fds.size(), gateMs < 0 ? leftMs : std::min(gateMs, leftMs));
    arrived.clear();
    gate.handle(listen, fds.data(), &arrived);
    for (HelloGate::Arrival& a : arrived) {
      wire::Hello hello;
      std::memcpy(&hello, a.hello.data(), sizeof(hello));
      if (nranks < 0) nranks = hello.nranks;
      error = checkHello(hello, arrivals, nranks);
      arrivals.push_back(Arrival{std::move(a.socket), hello});
      if (!error.empty()) break;
    }
  }
  if (!error.empty()) WEFT_WARN("%s: %s", name.c_str(), error.c_str());
  replyAll(arrivals, error);
  WEFT_INFO(log::kBootstrap, "%s served %zu ranks", name.c_str(), arrivals.size());
}

}  // namespace

void startRoot(Socket listen, uint64_t secret) { std::thread(serve, std::move(listen), secret).detach(); }

}  // namespace weft::core
