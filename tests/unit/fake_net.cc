#include "fake_net.h"

#include <algorithm>
#include <cstring>

namespace weft::testing {
namespace {

FakeNet::Comm* commOf(void* comm) { return static_cast<FakeNet::Comm*>(comm); }

ncclResult_t fakeInit(weftNetLogger_t) { return ncclSuccess; }
ncclResult_t fakeDevices(int* ndev) {
  *ndev = 1;
  return ncclSuccess;
}
ncclResult_t fakeGetProperties(int, weftNetProperties_v8_t* props) {
  std::memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>("fake");
  props->ptrSupport = kNetPtrHost;
  props->maxRecvs = 1;
  return ncclSuccess;
}
// Connections are made by constructing a FakeNet, not through the table.
ncclResult_t fakeListen(int, void*, void**) { return ncclInternalError; }
ncclResult_t fakeConnect(int, void*, void**, weftNetDeviceHandle_v8_t**) { return ncclInternalError; }
ncclResult_t fakeAccept(void*, void**, weftNetDeviceHandle_v8_t**) { return ncclInternalError; }
ncclResult_t fakeRegMr(void* comm, void* data, size_t size, int, void** mhandle) {
  return commOf(comm)->net->regMr(commOf(comm), data, size, mhandle);
}
ncclResult_t fakeRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInternalError; }
ncclResult_t fakeDeregMr(void*, void*) { return ncclSuccess; }
ncclResult_t fakeIsend(void* comm, void* data, int size, int, void*, void** request) {
  return commOf(comm)->net->post(commOf(comm), static_cast<char*>(data), size, request);
}
ncclResult_t fakeIrecv(void* comm, int n, void** data, int* sizes, int*, void**, void** request) {
  if (n != 1) return ncclInternalError;
  return commOf(comm)->net->post(commOf(comm), static_cast<char*>(data[0]), sizes[0], request);
}
ncclResult_t fakeIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return ncclSuccess;
}
ncclResult_t fakeTest(void* request, int* done, int* size) {
  auto* r = static_cast<FakeNet::Request*>(request);
  return r->comm->net->test(r, done, size);
}
ncclResult_t fakeClose(void* comm) {
  commOf(comm)->net->close();
  return ncclSuccess;
}
ncclResult_t fakeCloseListen(void*) { return ncclSuccess; }
ncclResult_t fakeGetDeviceMr(void*, void*, void**) { return ncclInternalError; }
ncclResult_t fakeIrecvConsumed(void*, int, void*) { return ncclSuccess; }

const weftNet_v8_t kFakeTable = {"Fake",      fakeInit,        fakeDevices,     fakeGetProperties, fakeListen,
                                 fakeConnect, fakeAccept,      fakeRegMr,       fakeRegMrDmaBuf,   fakeDeregMr,
                                 fakeIsend,   fakeIrecv,       fakeIflush,      fakeTest,          fakeClose,
                                 fakeClose,   fakeCloseListen, fakeGetDeviceMr, fakeIrecvConsumed};

}  // namespace

FakeNet::FakeNet(const Options& options) : options_(options), send_{this, true}, recv_{this, false} {
  network_.api = transport::adaptNetTable(8, &kFakeTable);
  network_.devices = 1;
  network_.external = true;  // the proxy asks a built-in network for its last error; this one has none
  network_.library = "fake";
}

void FakeNet::injectFault(Call call, ncclResult_t code, int after) {
  faults_[static_cast<int>(call)] = Fault{true, code, after};
}

bool FakeNet::faultFires(Call call, ncclResult_t* code) {
  Fault& fault = faults_[static_cast<int>(call)];
  if (!fault.armed) return false;
  if (fault.after > 0) {
    fault.after -= 1;
    return false;
  }
  *code = fault.code;
  return true;
}

ncclResult_t FakeNet::regMr(Comm* comm, void* data, size_t size, void** mhandle) {
  comm->regBegin = static_cast<char*>(data);
  comm->regEnd = comm->regBegin + size;
  *mhandle = comm;
  return ncclSuccess;
}

ncclResult_t FakeNet::post(Comm* comm, char* data, int64_t bytes, void** request) {
  *request = nullptr;
  ncclResult_t code;
  if (faultFires(comm->isSend ? Call::kIsend : Call::kIrecv, &code)) return code;
  comm->posts += 1;
  const bool busy = (options_.busyEvery > 0 && comm->posts % options_.busyEvery == 0) ||
                    static_cast<int>(comm->pending.size()) >= options_.maxInFlight;
  if (busy) {
    counters_.busyAnswers += 1;
    return ncclSuccess;
  }
  if (data < comm->regBegin || data + bytes > comm->regEnd) counters_.unregisteredPosts += 1;
  requests_.push_back(Request{comm, data, bytes, options_.testsBeforeDone});
  Request* r = &requests_.back();
  known_.insert(r);
  comm->pending.push_back(r);
  const int inFlight = static_cast<int>(comm->pending.size());
  if (comm->isSend) {
    counters_.sendsPosted += 1;
    counters_.maxSendsInFlight = std::max(counters_.maxSendsInFlight, inFlight);
  } else {
    counters_.recvsPosted += 1;
    counters_.maxRecvsInFlight = std::max(counters_.maxRecvsInFlight, inFlight);
  }
  *request = r;
  return ncclSuccess;
}

// A send puts its bytes on the wire now (it reads its buffer only at the
// end); a receive takes the oldest message on the wire, if there is one.
bool FakeNet::complete(Request* r, int* size, ncclResult_t* rc) {
  if (r->comm->isSend) {
    wire_.emplace_back(r->data, r->data + r->bytes);
    *size = static_cast<int>(r->bytes);
    counters_.sendsDone += 1;
    return true;
  }
  if (wire_.empty()) return false;
  std::vector<char> message = std::move(wire_.front());
  wire_.pop_front();
  if (static_cast<int64_t>(message.size()) > r->bytes) {
    counters_.oversizedMessages += 1;
    *rc = ncclInternalError;
    return false;
  }
  std::copy(message.begin(), message.end(), r->data);
  *size = static_cast<int>(message.size());
  counters_.recvsDone += 1;
  return true;
}

ncclResult_t FakeNet::test(Request* r, int* done, int* size) {
  *done = 0;
  if (known_.count(r) == 0 || r->finished) {
    counters_.deadRequestTests += 1;
    return ncclInternalError;
  }
  ncclResult_t code;
  if (faultFires(r->comm->isSend ? Call::kTestSend : Call::kTestRecv, &code)) return code;
  if (r->comm->pending.front() != r) {
    counters_.outOfOrderTests += 1;
    return ncclSuccess;
  }
  if (r->testsLeft > 0) {
    r->testsLeft -= 1;
    return ncclSuccess;
  }
  ncclResult_t rc = ncclSuccess;
  int bytes = 0;
  if (!complete(r, &bytes, &rc)) return rc;
  r->finished = true;
  r->comm->pending.pop_front();
  *done = 1;
  if (size) *size = bytes;
  return ncclSuccess;
}

}  // namespace weft::testing
