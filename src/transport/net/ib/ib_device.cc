#include "transport/net/ib/ib_device.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/log.h"
#include "common/params.h"

namespace weft::transport::ib {

HcaFilter parseHcaFilter(const std::string& spec) {
  HcaFilter f;
  size_t at = 0;
  if (at < spec.size() && spec[at] == '^') {
    f.exclude = true;
    ++at;
  }
  if (at < spec.size() && spec[at] == '=') {
    f.exact = true;
    ++at;
  }
  while (at <= spec.size()) {
    size_t end = spec.find(',', at);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(at, end - at);
    if (!item.empty()) {
      HcaFilter::Entry e;
      const size_t colon = item.find(':');
      e.name = item.substr(0, colon);
      if (colon != std::string::npos) e.port = std::atoi(item.c_str() + colon + 1);
      f.entries.push_back(e);
    }
    at = end + 1;
  }
  return f;
}

bool hcaSelected(const HcaFilter& filter, const std::string& device, int port) {
  if (filter.entries.empty()) return true;
  bool listed = false;
  for (const HcaFilter::Entry& e : filter.entries) {
    const bool nameMatches = filter.exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    listed = listed || (nameMatches && (e.port < 0 || e.port == port));
  }
  return filter.exclude ? !listed : listed;
}

int portSpeedMbps(int activeSpeed, int activeWidth) {
  int laneMbps = 0;
  switch (activeSpeed) {
    case 1: laneMbps = 2500; break;      // SDR
    case 2: laneMbps = 5000; break;      // DDR
    case 4: laneMbps = 10000; break;     // QDR
    case 8: laneMbps = 10000; break;     // FDR10
    case 16: laneMbps = 14000; break;    // FDR
    case 32: laneMbps = 25000; break;    // EDR
    case 64: laneMbps = 50000; break;    // HDR
    case 128: laneMbps = 100000; break;  // NDR
    case 256: laneMbps = 200000; break;  // XDR
    default: return 0;
  }
  int lanes = 0;
  switch (activeWidth) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  return laneMbps * lanes;
}

namespace {

bool zeroGid(const ibv_gid& g) {
  static const ibv_gid kZero{};
  return std::memcmp(&g, &kZero, sizeof(g)) == 0;
}

// ::ffff:a.b.c.d, how RoCE writes an IPv4 address into a GID.
bool ipv4Mapped(const ibv_gid& g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kPrefix, sizeof(kPrefix)) == 0;
}

bool linkLocal(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

}  // namespace

int chooseGidIndex(const std::vector<GidCandidate>& table, int family, int rocev) {
  int fallback = -1;
  for (const GidCandidate& c : table) {
    if (zeroGid(c.gid) || (c.rocev != 0 && c.rocev != rocev)) continue;
    if ((family == AF_INET) != ipv4Mapped(c.gid)) continue;
    if (family == AF_INET6 && linkLocal(c.gid)) {
      if (fallback < 0) fallback = c.index;
      continue;
    }
    return c.index;
  }
  return fallback;
}

IbDevice::~IbDevice() {
  std::string why;
  const Verbs* v = verbs(&why);
  if (v == nullptr) return;
  for (auto& e : cache_) (void)v->deregMr(e->mr);
  if (pd) (void)v->deallocPd(pd);
}

Result<MrEntry*> IbDevice::registerMemory(void* data, size_t size) {
  static const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + std::max<size_t>(size, 1) + kPage - 1) & ~(kPage - 1);
  std::lock_guard<std::mutex> lock(cacheMutex_);
  if (MrEntry* reused = reuseLocked(begin, end, false)) return reused;
  const Verbs* v = verbs(nullptr);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  void* base = reinterpret_cast<void*>(begin);
  ibv_mr* mr = relaxedOrdering ? v->regMrIova2(pd, base, end - begin, begin, access | IBV_ACCESS_RELAXED_ORDERING)
                               : v->regMr(pd, base, end - begin, access);
  if (mr == nullptr)
    return errorStatus(ncclSystemError, "IB: registering %zu bytes at %p on %s failed: %s", size, data, label().c_str(),
                       std::strerror(errno));
  cache_.push_back(std::make_unique<MrEntry>(MrEntry{begin, end, mr, 1, false}));
  return cache_.back().get();
}

MrEntry* IbDevice::reuseLocked(uintptr_t begin, uintptr_t end, bool dmaBuf) {
  for (auto& e : cache_) {
    if (e->dmaBuf == dmaBuf && e->begin <= begin && end <= e->end) {
      e->refs += 1;
      return e.get();
    }
  }
  return nullptr;
}

MrEntry* IbDevice::reuseDmaBuf(void* data, size_t size) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(cacheMutex_);
  return reuseLocked(begin, begin + std::max<size_t>(size, 1), true);
}

Result<MrEntry*> IbDevice::registerDmaBuf(void* data, size_t size, uint64_t offset, int fd) {
  // Not rounded to pages: the exporter's offset and the iova stay exactly
  // the caller's, so a work request's address maps to the byte it names.
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = begin + std::max<size_t>(size, 1);
  std::lock_guard<std::mutex> lock(cacheMutex_);
  if (MrEntry* reused = reuseLocked(begin, end, true)) return reused;
  const Verbs* v = verbs(nullptr);
  if (v->regDmabufMr == nullptr)
    return errorStatus(ncclInvalidUsage,
                       "IB: %s lacks ibv_reg_dmabuf_mr (rdma-core before v34): GPU memory cannot be "
                       "registered, so GPUDirect RDMA is unavailable and the network uses host memory",
                       v->source);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = v->regDmabufMr(pd, offset, end - begin, begin, fd, access);
  if (mr == nullptr) {
    const int err = errno;
    const bool unsupported = err == EOPNOTSUPP || err == EPROTONOSUPPORT;
    return errorStatus(unsupported ? ncclInvalidUsage : ncclSystemError,
                       "IB: registering the dma-buf fd %d (offset %llu, %zu bytes at %p) on %s failed: %s%s", fd,
                       static_cast<unsigned long long>(offset), size, data, label().c_str(), std::strerror(err),
                       unsupported ? " (the kernel or the HCA's driver does not support dma-buf memory regions)" : "");
  }
  cache_.push_back(std::make_unique<MrEntry>(MrEntry{begin, end, mr, 1, true}));
  return cache_.back().get();
}

void IbDevice::deregister(MrEntry* entry) {
  std::lock_guard<std::mutex> lock(cacheMutex_);
  if (--entry->refs > 0) return;
  (void)verbs(nullptr)->deregMr(entry->mr);
  cache_.erase(std::find_if(cache_.begin(), cache_.end(), [entry](const auto& e) { return e.get() == entry; }));
}

}  // namespace weft::transport::ib
