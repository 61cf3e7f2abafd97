// The IB network's devices: which HCA ports it uses (NCCL_IB_HCA), what each
// is (speed, PCI path, address), and the per-device memory-registration
// cache. One network device per active port, as NCCL numbers them.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/net/ib/ib_verbs.h"

namespace weft::transport::ib {

// NCCL_IB_HCA: "mlx5_0:1,mlx5_1" (prefixes, optional :port), "^mlx5_3"
// (excluded), "=mlx5_0" (exact names). Empty: every device and port.
struct HcaFilter {
  struct Entry {
    std::string name;
    int port = -1;  // -1: any port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;
};
HcaFilter parseHcaFilter(const std::string& spec);
bool hcaSelected(const HcaFilter& filter, const std::string& device, int port);

// Mb/s of a port from its active_speed and active_width codes; 0 when a
// code is unknown.
int portSpeedMbps(int activeSpeed, int activeWidth);

// A GID table entry as the RoCE selection sees it.
struct GidCandidate {
  int index = 0;
  ibv_gid gid{};
  int rocev = 0;  // 1 or 2 from sysfs; 0: the kernel did not say
};
// The index NCCL_IB_ADDR_FAMILY (AF_INET/AF_INET6) and
// NCCL_IB_ROCE_VERSION_NUM pick among `table`: the first non-zero GID of that
// family and version (IPv6 link-local only when nothing else matches); -1
// when none does.
int chooseGidIndex(const std::vector<GidCandidate>& table, int family, int rocev);

// A registered range, shared by every registration the range covers.
struct MrEntry {
  uintptr_t begin = 0, end = 0;  // host memory: page-aligned; a dma-buf: as registered
  ibv_mr* mr = nullptr;
  int refs = 0;
  bool dmaBuf = false;  // GPU memory registered through a dma-buf: receives into it need iflush
};

// One active port of one HCA: a network device.
class IbDevice {
 public:
  IbDevice() = default;
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  std::string name;  // the HCA's ("mlx5_0")
  int port = 1;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  uint64_t guid = 0;
  uint16_t lid = 0;
  bool ethernet = false;  // RoCE
  ibv_mtu mtu = IBV_MTU_1024;
  int gidIndex = 0;
  ibv_gid gid{};
  int speedMbps = 0;
  std::string pciPath;
  int maxQp = 0;
  bool relaxedOrdering = false;
  std::shared_ptr<void> contextOwner;  // closes the HCA when its last port goes

  // Registers [data, data+size) or takes a reference on a registration that
  // covers it (same or larger range): registering one range twice costs one
  // ibv_reg_mr.
  Result<MrEntry*> registerMemory(void* data, size_t size);
  // Registers bytes [offset, offset+size) of the dma-buf `fd` as the range
  // [data, data+size) (ibv_reg_dmabuf_mr), or takes a reference on a dma-buf
  // registration that covers the range. `fd` stays the caller's.
  Result<MrEntry*> registerDmaBuf(void* data, size_t size, uint64_t offset, int fd);
  // A reference on the cached dma-buf registration covering [data,
  // data+size), or null when none does (the caller then exports and registers).
  MrEntry* reuseDmaBuf(void* data, size_t size);
  void deregister(MrEntry* entry);
  std::string label() const { return name + ":" + std::to_string(port); }

 private:
  // A reference on a cached entry of that kind covering [begin, end), or null.
  MrEntry* reuseLocked(uintptr_t begin, uintptr_t end, bool dmaBuf);

  std::mutex cacheMutex_;
  std::vector<std::unique_ptr<MrEntry>> cache_;
};

// The usable ports, probed once per process; empty with the reason in `why`.
const std::vector<std::unique_ptr<IbDevice>>& ibDevices(std::string* why);

}  // namespace weft::transport::ib
