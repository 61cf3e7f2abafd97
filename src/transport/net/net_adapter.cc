// One adapter per plugin interface version, written once as a template: the
// tables share their member names, and `if constexpr` on the version picks
// the call shape each version has (see net_api.h for the list).
#include <climits>
#include <type_traits>

#include "transport/net/net_api.h"
#include "transport/net/net_v11.h"
#include "transport/net/net_v6.h"
#include "transport/net/net_v7.h"
#include "transport/net/net_v9.h"

namespace weft::transport {
namespace {

template <int V>
struct TableOf;
template <>
struct TableOf<6> {
  using Table = weftNet_v6_t;
  using Properties = weftNetProperties_v6_t;
};
template <>
struct TableOf<7> {
  using Table = weftNet_v7_t;
  using Properties = weftNetProperties_v7_t;
};
template <>
struct TableOf<8> {
  using Table = weftNet_v8_t;
  using Properties = weftNetProperties_v8_t;
};
template <>
struct TableOf<9> {
  using Table = weftNet_v9_t;
  using Properties = weftNetProperties_v9_t;
};
template <>
struct TableOf<10> {
  using Table = weftNet_v10_t;
  using Properties = weftNetProperties_v10_t;
};
template <>
struct TableOf<11> {
  using Table = weftNet_v11_t;
  using Properties = weftNetProperties_v11_t;
};
template <>
struct TableOf<12> {
  using Table = weftNet_v12_t;
  using Properties = weftNetProperties_v12_t;
};

// Weft records no network events: a plugin's profiler calls get no handle.
ncclResult_t noProfiler(void** eHandle, int, void*, int64_t, void*) {
  if (eHandle) *eHandle = nullptr;
  return ncclSuccess;
}

// Versions before 9 take int sizes: a larger message cannot be expressed.
bool fitsInt(size_t size) { return size <= static_cast<size_t>(INT_MAX); }

// The most buffers one irecv carries (maxRecvs is 8 at most in NCCL's plugins).
constexpr int kMaxGroupedRecvs = 8;

template <int V>
class VersionedNet final : public NetApi {
  using Table = typename TableOf<V>::Table;
  using Properties = typename TableOf<V>::Properties;

 public:
  explicit VersionedNet(const Table* table) : t_(table) {}
  ~VersionedNet() override {
    if constexpr (V >= 11) {
      if (ctx_ != nullptr && t_->finalize != nullptr) (void)t_->finalize(ctx_);
    }
  }

  const char* name() const override { return t_->name; }
  int version() const override { return V; }

  ncclResult_t init(weftNetLogger_t logger) override {
    if constexpr (V >= 11) {
      // One context for the process; NCCL makes one per communicator.
      weftNetCommConfig_v11_t config{kNetTrafficClassUndef};
      return t_->init(&ctx_, 0, &config, logger, noProfiler);
    } else if constexpr (V == 10) {
      return t_->init(logger, noProfiler);
    } else {
      return t_->init(logger);
    }
  }

  ncclResult_t devices(int* ndev) const override { return t_->devices(ndev); }

  ncclResult_t getProperties(int dev, NetProperties* out) const override {
    Properties props{};
    ncclResult_t rc = t_->getProperties(dev, &props);
    if (rc != ncclSuccess) return rc;
    *out = NetProperties{};
    out->name = props.name ? props.name : "";
    out->pciPath = props.pciPath ? props.pciPath : "";
    out->guid = props.guid;
    out->ptrSupport = props.ptrSupport;
    out->speedMbps = props.speed;
    out->port = props.port;
    out->latencyUs = props.latency;
    out->maxComms = props.maxComms;
    out->maxRecvs = props.maxRecvs;
    if constexpr (V >= 7) out->deviceType = props.netDeviceType;
    if constexpr (V >= 8) out->regIsGlobal = props.regIsGlobal != 0;
    if constexpr (V >= 9) {
      out->forceFlush = props.forceFlush != 0;
      out->maxMessageBytes = props.maxP2pBytes;
    }
    return ncclSuccess;
  }

  ncclResult_t listen(int dev, void* handle, void** listenComm) const override {
    if constexpr (V >= 11)
      return t_->listen(ctx_, dev, handle, listenComm);
    else
      return t_->listen(dev, handle, listenComm);
  }

  // Weft drives every network from the host: device handles are not kept.
  ncclResult_t connect(int dev, void* handle, void** sendComm) const override {
    weftNetDeviceHandle_v8_t* devComm = nullptr;
    if constexpr (V >= 11) {
      return t_->connect(ctx_, dev, handle, sendComm, &devComm);
    } else if constexpr (V == 10) {
      weftNetCommConfig_v10_t config{kNetTrafficClassUndef};
      return t_->connect(dev, &config, handle, sendComm, &devComm);
    } else if constexpr (V >= 7) {
      return t_->connect(dev, handle, sendComm, &devComm);
    } else {
      return t_->connect(dev, handle, sendComm);
    }
  }

  ncclResult_t accept(void* listenComm, void** recvComm) const override {
    weftNetDeviceHandle_v8_t* devComm = nullptr;
    if constexpr (V >= 7)
      return t_->accept(listenComm, recvComm, &devComm);
    else
      return t_->accept(listenComm, recvComm);
  }

  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) const override {
    if constexpr (V <= 7) {
      if (!fitsInt(size)) return ncclInvalidArgument;
      return t_->regMr(comm, data, static_cast<int>(size), type, mhandle);
    } else {
      return t_->regMr(comm, data, size, type, mhandle);
    }
  }

  ncclResult_t deregMr(void* comm, void* mhandle) const override { return t_->deregMr(comm, mhandle); }

  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) const override {
    if constexpr (V >= 10) {
      return t_->isend(sendComm, data, size, tag, mhandle, nullptr, request);
    } else if constexpr (V == 9) {
      return t_->isend(sendComm, data, size, tag, mhandle, request);
    } else {
      if (!fitsInt(size)) return ncclInvalidArgument;
      return t_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    }
  }

  ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request) const override {
    if (n < 1 || n > kMaxGroupedRecvs) return ncclInvalidArgument;
    if constexpr (V >= 10) {
      void* phandles[kMaxGroupedRecvs] = {};
      return t_->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
    } else if constexpr (V == 9) {
      return t_->irecv(recvComm, n, data, sizes, tags, mhandles, request);
    } else {
      int narrow[kMaxGroupedRecvs];
      for (int i = 0; i < n; ++i) {
        if (!fitsInt(sizes[i])) return ncclInvalidArgument;
        narrow[i] = static_cast<int>(sizes[i]);
      }
      return t_->irecv(recvComm, n, data, narrow, tags, mhandles, request);
    }
  }

  ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) const override {
    return t_->iflush(recvComm, n, data, sizes, mhandles, request);
  }
  ncclResult_t test(void* request, int* done, int* sizes) const override { return t_->test(request, done, sizes); }
  ncclResult_t closeSend(void* sendComm) const override { return t_->closeSend(sendComm); }
  ncclResult_t closeRecv(void* recvComm) const override { return t_->closeRecv(recvComm); }
  ncclResult_t closeListen(void* listenComm) const override { return t_->closeListen(listenComm); }

 private:
  const Table* t_;
  void* ctx_ = nullptr;  // v11+: what init returned
};

template <int V>
std::unique_ptr<NetApi> adapt(const void* table) {
  return std::make_unique<VersionedNet<V>>(static_cast<const typename TableOf<V>::Table*>(table));
}

}  // namespace

std::unique_ptr<NetApi> adaptNetTable(int version, const void* table) {
  if (table == nullptr) return nullptr;
  switch (version) {
    case 6: return adapt<6>(table);
    case 7: return adapt<7>(table);
    case 8: return adapt<8>(table);
    case 9: return adapt<9>(table);
    case 10: return adapt<10>(table);
    case 11: return adapt<11>(table);
    case 12: return adapt<12>(table);
    default: return nullptr;
  }
}

}  // namespace weft::transport
