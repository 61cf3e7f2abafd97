// One direction of a network connection as the proxy drives it: a FIFO in
// this process's memory, whose other end is the local data path (a host
// worker, or a kernel through mapped memory), and a network comm.
//
// Send link: the data path produces into the FIFO; the proxy sends each
// published slot (tail, sizes) and frees it (head) when the send completes.
// Receive link: the proxy receives into free slots (head) and publishes them
// (sizes, tail) when the receive completes; the data path consumes.
// The counters below are the proxy's; only the proxy thread touches them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "device/step_fifo.h"
#include "transport/net/net_plugin.h"

namespace weft::transport {

struct NetLink {
  NetLink() = default;
  ~NetLink();  // closes the network comms
  NetLink(const NetLink&) = delete;
  NetLink& operator=(const NetLink&) = delete;

  bool isSend = false;
  int channel = 0;
  int rank = 0;
  int peer = 0;
  std::string peerName;  // "rank 3 (host h2)", for messages
  const Network* net = nullptr;
  void* listenComm = nullptr;  // receive side, until accepted
  void* comm = nullptr;        // send or receive comm
  void* mhandle = nullptr;     // the FIFO slots' registration
  std::shared_ptr<void> memory;
  device::FifoEnd fifo{};  // the proxy's view: pointers only (its position is below)

  uint64_t target = 0;     // steps the posted operations ask for, in total
  uint64_t posted = 0;     // steps whose isend/irecv is posted
  uint64_t completed = 0;  // steps whose request completed
  void* requests[device::kFifoSteps] = {};
};

}  // namespace weft::transport
