// NCCL profiler plugins (NCCL_PROFILER_PLUGIN), loaded as NCCL 2.27 loads
// them: libnccl-profiler.so, or the library the setting names, with its
// newest table of ncclProfiler_v4 and _v3. Each communicator opens a session
// (the plugin's init, with its context; finalize when the communicator
// goes). Weft emits the events NCCL emits from the host: a group event per
// launch on a communicator, and under it one collective or point-to-point
// event per call, started before the work is handed to the data path and
// stopped once it is handed over (the host backend: once it has run; cuda:
// once it is launched), as NCCL does. Proxy, kernel-channel and
// network-plugin events are not emitted. docs/api.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace weft::core {

// A collective's event fields (NCCL's names: "AllReduce", "ncclFloat32",
// "RING", "SIMPLE", ...).
struct ProfiledColl {
  uint64_t seqNumber;  // per collective kind, counted on this communicator from 0
  const char* func;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  int root;
  const char* datatype;
  int nChannels;
  const char* algo;
  const char* proto;
};

struct ProfiledP2p {
  const char* func;  // "Send" or "Recv"
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  int nChannels;
};

class ProfilerSession {
 public:
  // Null when there is no plugin (none found and none asked for,
  // NCCL_PROFILER_PLUGIN=none, or init refused); a plugin asked for that
  // cannot be used is a WARN naming it and why, once per process.
  static std::unique_ptr<ProfilerSession> open(const std::string& commName, uint64_t commHash, int nNodes, int nranks,
                                               int rank);
  ~ProfilerSession();  // the plugin's finalize
  ProfilerSession(const ProfilerSession&) = delete;
  ProfilerSession& operator=(const ProfilerSession&) = delete;

  // Whether the plugin's activation mask (which it may change at any time)
  // asks for any event Weft emits.
  bool active() const;
  // Each returns the plugin's handle, or null when the mask leaves the
  // event out or the plugin gave none; stop(null) does nothing.
  void* startGroup(int rank) const;
  void* startColl(void* group, int rank, const ProfiledColl& coll) const;
  void* startP2p(void* group, int rank, const ProfiledP2p& p2p) const;
  void stop(void* handle) const;

  struct Library;  // the loaded plugin (profiler.cc)

 private:
  ProfilerSession(const Library* library, void* context, std::string commName, uint64_t commHash)
      : library_(library), context_(context), commName_(std::move(commName)), commHash_(commHash) {}
  const Library* library_;
  void* context_;
  std::string commName_;  // v3's descriptors carry it
  uint64_t commHash_;
};

}  // namespace weft::core
