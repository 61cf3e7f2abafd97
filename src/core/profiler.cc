#include "core/profiler.h"

#include <dlfcn.h>
#include <strings.h>

#include <utility>

#include "common/log.h"
#include "common/params.h"
#include "common/plugin_lib.h"
#include "common/status.h"
#include "core/profiler_tables.h"

namespace weft::core {

struct ProfilerSession::Library {
  std::string name;  // the table's
  std::string file;
  const weftProfiler_v4_t* v4 = nullptr;
  const weftProfiler_v3_t* v3 = nullptr;
};

namespace {

// The activation mask, one per process as in NCCL: every session's init is
// given its address, and a plugin may change it whenever it likes.
int gActivationMask = 0;

int activationMask() { return __atomic_load_n(&gActivationMask, __ATOMIC_RELAXED); }

// The events Weft emits, and what each needs enabled (a collective or
// point-to-point event is also the parent its finer events would hang on).
constexpr int kEmitted = weftProfileGroup | weftProfileColl | weftProfileP2p | weftProfileProxyOp |
                         weftProfileProxyStep | weftProfileKernelCh | weftProfileNetPlugin;
constexpr int kCollNeeds =
    weftProfileColl | weftProfileProxyOp | weftProfileProxyStep | weftProfileKernelCh | weftProfileNetPlugin;
constexpr int kP2pNeeds = weftProfileP2p | weftProfileProxyOp | weftProfileProxyStep | weftProfileKernelCh;

struct Loaded {
  std::unique_ptr<ProfilerSession::Library> library;
  bool requested = false;
};

// The library's newest table, or why there is none.
bool takeTable(void* handle, const std::string& file, ProfilerSession::Library* lib, std::string* why) {
  lib->v4 = static_cast<const weftProfiler_v4_t*>(dlsym(handle, "ncclProfiler_v4"));
  if (lib->v4 == nullptr) lib->v3 = static_cast<const weftProfiler_v3_t*>(dlsym(handle, "ncclProfiler_v3"));
  if (lib->v4 == nullptr && lib->v3 == nullptr) {
    const bool older = dlsym(handle, "ncclProfiler_v2") != nullptr || dlsym(handle, "ncclProfiler_v1") != nullptr;
    const bool newer = dlsym(handle, "ncclProfiler_v5") != nullptr;
    *why = strFormat("%s exports no ncclProfiler_v4 or _v3 table%s", file.c_str(),
                     newer   ? " (only newer ones: Weft loads those of NCCL 2.27)"
                     : older ? " (only older ones, v1 or v2, which Weft does not load)"
                             : "");
    return false;
  }
  const char* name = lib->v4 ? lib->v4->name : lib->v3->name;
  lib->name = name != nullptr ? name : "unnamed";
  lib->file = file;
  return true;
}

Loaded loadLibrary() {
  const std::string setting = param::profilerPlugin();
  Loaded out;
  out.requested = !setting.empty();
  if (strcasecmp(setting.c_str(), "none") == 0) return out;
  const std::string name = setting.empty() ? "libnccl-profiler.so" : setting;
  std::string file, why;
  void* handle = openPluginLibrary(name, "profiler", &file, &why);
  auto lib = std::make_unique<ProfilerSession::Library>();
  if (handle != nullptr && takeTable(handle, file, lib.get(), &why)) {
    WEFT_INFO(log::kInit, "PROFILER/Plugin: loaded %s from %s (ncclProfiler_v%d)", lib->name.c_str(), file.c_str(),
              lib->v4 ? 4 : 3);
    out.library = std::move(lib);
    return out;
  }
  if (out.requested)
    WEFT_WARN("NCCL_PROFILER_PLUGIN=%s cannot be used: %s; running without a profiler", setting.c_str(), why.c_str());
  else
    WEFT_INFO(log::kInit, "PROFILER/Plugin: none found (%s)", why.c_str());
  return out;
}

const Loaded& processLibrary() { return loadOncePerSetting<Loaded>(param::profilerPlugin(), loadLibrary); }

}  // namespace

std::unique_ptr<ProfilerSession> ProfilerSession::open(const std::string& commName, uint64_t commHash, int nNodes,
                                                       int nranks, int rank) {
  const Library* lib = processLibrary().library.get();
  if (lib == nullptr) return nullptr;
  void* context = nullptr;
  const ncclResult_t rc = lib->v4 ? lib->v4->init(&context, &gActivationMask, commName.c_str(), commHash, nNodes,
                                                  nranks, rank, reinterpret_cast<weftProfilerLogger_t>(&pluginLog))
                                  : lib->v3->init(&context, &gActivationMask);
  if (rc != ncclSuccess) {
    WEFT_WARN("profiler plugin %s (%s): init returned %d; this communicator runs without it", lib->name.c_str(),
              lib->file.c_str(), static_cast<int>(rc));
    return nullptr;
  }
  return std::unique_ptr<ProfilerSession>(new ProfilerSession(lib, context, commName, commHash));
}

ProfilerSession::~ProfilerSession() {
  const ncclResult_t rc = library_->v4 ? library_->v4->finalize(context_) : library_->v3->finalize(context_);
  if (rc != ncclSuccess) WEFT_INFO(log::kInit, "profiler plugin %s: finalize returned %d", library_->name.c_str(), rc);
}

bool ProfilerSession::active() const { return (activationMask() & kEmitted) != 0; }

void* ProfilerSession::startGroup(int rank) const {
  if ((activationMask() & kEmitted) == 0) return nullptr;
  void* handle = nullptr;
  if (library_->v4) {
    weftProfilerDescr_v4_t d{};
    d.type = weftProfileGroup;
    d.rank = rank;
    (void)library_->v4->startEvent(context_, &handle, &d);
  } else {
    weftProfilerDescr_v3_t d{};
    d.type = weftProfileGroup;
    d.rank = rank;
    (void)library_->v3->startEvent(context_, &handle, &d);
  }
  return handle;
}

void* ProfilerSession::startColl(void* group, int rank, const ProfiledColl& c) const {
  if (group == nullptr || (activationMask() & kCollNeeds) == 0) return nullptr;
  void* handle = nullptr;
  if (library_->v4) {
    weftProfilerDescr_v4_t d{};
    d.type = weftProfileColl;
    d.parentObj = group;
    d.rank = rank;
    d.coll = {c.seqNumber, c.func, c.sendbuff, c.recvbuff,
              c.count,     c.root, c.datatype, static_cast<uint8_t>(c.nChannels),
              0,           c.algo, c.proto};
    (void)library_->v4->startEvent(context_, &handle, &d);
  } else {
    weftProfilerDescr_v3_t d{};
    d.type = weftProfileColl;
    d.parentObj = group;
    d.rank = rank;
    d.coll = {commName_.c_str(),
              commHash_,
              c.seqNumber,
              c.func,
              c.sendbuff,
              c.recvbuff,
              c.count,
              c.root,
              c.datatype,
              static_cast<uint8_t>(c.nChannels),
              0,
              c.algo,
              c.proto};
    (void)library_->v3->startEvent(context_, &handle, &d);
  }
  return handle;
}

void* ProfilerSession::startP2p(void* group, int rank, const ProfiledP2p& p) const {
  if (group == nullptr || (activationMask() & kP2pNeeds) == 0) return nullptr;
  void* handle = nullptr;
  if (library_->v4) {
    weftProfilerDescr_v4_t d{};
    d.type = weftProfileP2p;
    d.parentObj = group;
    d.rank = rank;
    d.p2p = {p.func, p.buff, p.datatype, p.count, p.peer, static_cast<uint8_t>(p.nChannels)};
    (void)library_->v4->startEvent(context_, &handle, &d);
  } else {
    weftProfilerDescr_v3_t d{};
    d.type = weftProfileP2p;
    d.parentObj = group;
    d.rank = rank;
    d.p2p = {commName_.c_str(), commHash_, p.func, p.buff, p.datatype, p.count, p.peer};
    (void)library_->v3->startEvent(context_, &handle, &d);
  }
  return handle;
}

void ProfilerSession::stop(void* handle) const {
  if (handle == nullptr) return;
  (void)(library_->v4 ? library_->v4->stopEvent(handle) : library_->v3->stopEvent(handle));
}

}  // namespace weft::core
