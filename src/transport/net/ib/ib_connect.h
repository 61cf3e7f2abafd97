// Setting up an IB connection over a TCP socket, as NCCL does: the receiver
// listens and puts {address, cookie, QPs per connection, its device's ports}
// in the handle; the sender connects, decides the connection's QP count
// (QPs per connection times the larger side's ports, at most 16), creates its
// queues and sends its QP numbers, port addresses and FIFO location; the receiver creates its queues, moves them to RTS and
// answers with its own; the sender moves its queues to RTS and sends one
// "ready" byte, after which the receiver may offer buffers (its FIFO writes
// then find the sender's QPs able to receive). No call waits on the peer:
// connect and accept return a null comm until their side is done.
#pragma once

#include "common/socket.h"
#include "nccl.h"

namespace weft::transport::ib {

ncclResult_t listen(int dev, void* handle, void** listenComm);
ncclResult_t connect(int dev, void* handle, void** sendComm);
ncclResult_t accept(void* listenComm, void** recvComm);
ncclResult_t closeListen(void* listenComm);

// The set-up socket address a listen handle names (tests knock on it).
SocketAddress handleAddress(const void* handle);

}  // namespace weft::transport::ib
