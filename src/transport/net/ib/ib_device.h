// The IB network's devices: which HCA ports it uses (NCCL_IB_HCA), what each
// is (speed, PCI path, address), the per-port memory-registration cache, and
// how ports are merged into network devices (NCCL_IB_MERGE_NICS): one network
// device per active port, except that the ports of one multi-port NIC become
// one device, as NCCL numbers them.
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

// At most this many ports make one network device (NCCL's limit).
constexpr int kMaxPortsPerDevice = 4;

// What the merging rule looks at of a port.
struct PortPlacement {
  std::string pciPath;  // sysfs path of its PCI function; empty: not on PCI (never merged)
  bool ethernet = false;
};

// `path` without its PCI function number: "/sys/.../0000:17:00.1" gives
// "/sys/.../0000:17:00"; empty when the path does not end in a function.
std::string pciPathWithoutFunction(const std::string& path);

// What two ports' paths must share to be merged: the path but for the
// function ("/sys/.../0000:17:00"), or with `mergeVfs` (NCCL_IB_MERGE_VFS)
// but for the device and function ("/sys/.../0000:17:"), so that virtual
// functions, whose device numbers differ, merge too. Empty: never merged.
std::string pciMergeKey(const std::string& path, bool mergeVfs);

// The network devices `ports` make, each a list of indices into `ports` in
// probe order. With `merge`, a port joins the first earlier device whose
// first port has the same link layer and the same pciMergeKey (two
// functions of one PCI device: the ports of one multi-port NIC), while that
// device has fewer than `maxPerDevice` ports; otherwise it starts a device
// of its own. Without `merge`, one device per port.
std::vector<std::vector<int>> mergePorts(const std::vector<PortPlacement>& ports, bool merge, bool mergeVfs = false,
                                         int maxPerDevice = kMaxPortsPerDevice);

// One registration on every port of a network device; what the plugin hands
// out as an mhandle. entries[i] is port i's (its lkey and rkey).
struct MrHandle {
  int count = 0;
  MrEntry* entries[kMaxPortsPerDevice] = {};
  bool dmaBuf = false;  // GPU memory through dma-buf: receives into it need iflush
};

// A network device: one port, or the ports of one NIC merged ("mlx5_0+mlx5_1").
// A connection on it spreads its queue pairs over the ports (ib_comm.h).
class IbNetDevice {
 public:
  std::string name;
  std::vector<IbDevice*> ports;  // probe order; ports[0] gives the PCI path, GUID and port number
  int speedMbps = 0;             // the ports' sum

  int portCount() const { return static_cast<int>(ports.size()); }
  // For messages: "mlx5_0:1" for one port, the merged name otherwise.
  std::string label() const { return ports.size() == 1 ? ports[0]->label() : name; }
  // Host memory, GPU memory (exported as a dma-buf here), or a dma-buf the
  // caller exported, registered on every port (each through its own cache).
  Result<MrHandle*> registerHost(void* data, size_t size);
  Result<MrHandle*> registerCuda(void* data, size_t size);
  Result<MrHandle*> registerDmaBuf(void* data, size_t size, uint64_t offset, int fd);
  void deregister(MrHandle* handle);

 private:
  template <typename Fn>
  Result<MrHandle*> registerEach(bool dmaBuf, Fn&& one);
};

// The usable ports, probed once per process; empty with the reason in `why`.
const std::vector<std::unique_ptr<IbDevice>>& ibPorts(std::string* why);
// The network devices those ports make (NCCL_IB_MERGE_NICS); empty with the
// reason in `why`.
const std::vector<std::unique_ptr<IbNetDevice>>& ibDevices(std::string* why);

}  // namespace weft::transport::ib
