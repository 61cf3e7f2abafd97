// Calls on communicators that are not live: destroyed, aborted, or never
// made. Each must return ncclInvalidArgument with a message naming the
// handle, without reading through it (the ASan suite runs these too: a read
// of the freed communicator is a failure there).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "weft.h"

namespace {

ncclComm_t makeOneRankComm() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  return comm;
}

void expectRefused(ncclResult_t result, ncclComm_t comm, const char* call) {
  EXPECT_EQ(result, ncclInvalidArgument) << call;
  const std::string message = ncclGetLastError(nullptr);
  EXPECT_NE(message.find("not a live communicator"), std::string::npos) << call << ": " << message;
  char address[32];
  std::snprintf(address, sizeof(address), "%p", static_cast<void*>(comm));
  EXPECT_NE(message.find(address), std::string::npos) << call << ": " << message;
}

// Every entry point that takes a communicator, on `comm`.
void expectEveryCallRefused(ncclComm_t comm) {
  std::vector<float> buf(64, 1.0f);
  float* b = buf.data();
  int value = 0;
  ncclResult_t async = ncclSuccess;
  expectRefused(ncclAllReduce(b, b, 8, ncclFloat32, ncclSum, comm, nullptr), comm, "AllReduce");
  expectRefused(ncclBroadcast(b, b, 8, ncclFloat32, 0, comm, nullptr), comm, "Broadcast");
  expectRefused(ncclBcast(b, 8, ncclFloat32, 0, comm, nullptr), comm, "Bcast");
  expectRefused(ncclReduce(b, b, 8, ncclFloat32, ncclSum, 0, comm, nullptr), comm, "Reduce");
  expectRefused(ncclAllGather(b, b, 8, ncclFloat32, comm, nullptr), comm, "AllGather");
  expectRefused(ncclReduceScatter(b, b, 8, ncclFloat32, ncclSum, comm, nullptr), comm, "ReduceScatter");
  expectRefused(ncclSend(b, 8, ncclFloat32, 0, comm, nullptr), comm, "Send");
  expectRefused(ncclRecv(b, 8, ncclFloat32, 0, comm, nullptr), comm, "Recv");
  expectRefused(ncclAlltoAll(b, b, 8, ncclFloat32, comm, nullptr), comm, "AlltoAll");
  expectRefused(ncclGather(b, b, 8, ncclFloat32, 0, comm, nullptr), comm, "Gather");
  expectRefused(ncclScatter(b, b, 8, ncclFloat32, 0, comm, nullptr), comm, "Scatter");
  expectRefused(ncclCommCount(comm, &value), comm, "CommCount");
  expectRefused(ncclCommUserRank(comm, &value), comm, "CommUserRank");
  expectRefused(ncclCommCuDevice(comm, &value), comm, "CommCuDevice");
  expectRefused(ncclCommGetAsyncError(comm, &async), comm, "CommGetAsyncError");
  ncclComm_t child = nullptr;
  expectRefused(ncclCommSplit(comm, 0, 0, &child, nullptr), comm, "CommSplit");
  EXPECT_EQ(child, nullptr);
  void* handle = nullptr;
  expectRefused(ncclCommRegister(comm, b, 64, &handle), comm, "CommRegister");
  expectRefused(ncclCommDeregister(comm, reinterpret_cast<void*>(0x10)), comm, "CommDeregister");
  ncclRedOp_t op;
  float scalar = 2.0f;
  expectRefused(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm), comm,
                "RedOpCreatePreMulSum");
  expectRefused(ncclCommFinalize(comm), comm, "CommFinalize");
  weftBackend_t backend;
  expectRefused(weftCommGetBackend(comm, &backend), comm, "weftCommGetBackend");
  // A second destroy or abort of the same handle is refused the same way.
  expectRefused(ncclCommDestroy(comm), comm, "CommDestroy");
  expectRefused(ncclCommAbort(comm), comm, "CommAbort");
  // ncclGetLastError of such a handle gives the thread's message, not garbage.
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("not a live communicator"), std::string::npos);
}

TEST(Handles, CallsAfterDestroyAreRefused) {
  ncclComm_t comm = makeOneRankComm();
  ASSERT_NE(comm, nullptr);
  // Warm the repeat path (its thread holds the lock's bias): the refused call
  // below must not take it through the freed communicator.
  std::vector<float> in(8, 1.0f), out(8, 0.0f);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), 8, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  expectEveryCallRefused(comm);
}

TEST(Handles, CallsAfterAbortAreRefused) {
  ncclComm_t comm = makeOneRankComm();
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
  expectEveryCallRefused(comm);
}

TEST(Handles, NeverInitialisedHandlesAreRefused) {
  // Memory that was never a communicator: zeros, garbage, and a misaligned address.
  alignas(64) static unsigned char zeros[4096];
  std::unique_ptr<unsigned char[]> garbage(new unsigned char[4096]);
  for (int i = 0; i < 4096; ++i) garbage[i] = static_cast<unsigned char>(i * 37 + 11);
  expectEveryCallRefused(reinterpret_cast<ncclComm_t>(zeros));
  expectEveryCallRefused(reinterpret_cast<ncclComm_t>(garbage.get()));
  expectEveryCallRefused(reinterpret_cast<ncclComm_t>(reinterpret_cast<uintptr_t>(garbage.get()) + 3));
}

TEST(Handles, NullIsRefusedNamingTheArgument) {
  std::vector<float> b(8, 1.0f);
  EXPECT_EQ(ncclAllReduce(b.data(), b.data(), 8, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("comm is NULL"), std::string::npos);
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclInvalidArgument);
}

TEST(Handles, ManyCommunicatorsComeAndGoWhileOthersStayLive) {
  // Enough live communicators to grow the registry's table several times,
  // destroyed in an order unlike their creation; the survivors keep working.
  std::vector<ncclComm_t> comms;
  for (int i = 0; i < 150; ++i) comms.push_back(makeOneRankComm());
  for (size_t i = 0; i < comms.size(); i += 2) ASSERT_EQ(ncclCommDestroy(comms[i]), ncclSuccess);
  std::vector<int> in(4, 7), out(4, 0);
  for (size_t i = 0; i < comms.size(); ++i) {
    const ncclResult_t r = ncclAllReduce(in.data(), out.data(), 4, ncclInt32, ncclSum, comms[i], nullptr);
    EXPECT_EQ(r, i % 2 == 0 ? ncclInvalidArgument : ncclSuccess) << i;
  }
  EXPECT_EQ(out, in);
  for (size_t i = 1; i < comms.size(); i += 2) ASSERT_EQ(ncclCommDestroy(comms[i]), ncclSuccess);
}

}  // namespace
