// Merged network devices (NCCL_IB_MERGE_NICS): which ports make one device,
// and registering memory on every port of a device.
#include <cctype>

#include "transport/net/ib/ib_device.h"
#include "transport/net/ib/ib_gdr.h"

namespace weft::transport::ib {

std::string pciPathWithoutFunction(const std::string& path) {
  // A PCI address ends "bus:device.function", the function one digit (0-7).
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || dot + 2 != path.size() || !std::isdigit(static_cast<unsigned char>(path[dot + 1])))
    return "";
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > dot) return "";
  return path.substr(0, dot);
}

std::string pciMergeKey(const std::string& path, bool mergeVfs) {
  const std::string slot = pciPathWithoutFunction(path);
  if (!mergeVfs || slot.empty()) return slot;
  // "…/0000:17:00" less its device number: "…/0000:17:".
  const size_t colon = slot.rfind(':');
  const size_t slash = slot.rfind('/');
  if (colon == std::string::npos || (slash != std::string::npos && slash > colon)) return "";
  return slot.substr(0, colon + 1);
}

std::vector<std::vector<int>> mergePorts(const std::vector<PortPlacement>& ports, bool merge, bool mergeVfs,
                                         int maxPerDevice) {
  std::vector<std::vector<int>> devices;
  for (int i = 0; i < static_cast<int>(ports.size()); ++i) {
    const PortPlacement& p = ports[static_cast<size_t>(i)];
    const std::string slot = pciMergeKey(p.pciPath, mergeVfs);
    std::vector<int>* joined = nullptr;
    if (merge && !slot.empty()) {
      for (std::vector<int>& d : devices) {
        const PortPlacement& first = ports[static_cast<size_t>(d.front())];
        if (static_cast<int>(d.size()) < maxPerDevice && first.ethernet == p.ethernet &&
            pciMergeKey(first.pciPath, mergeVfs) == slot) {
          joined = &d;
          break;
        }
      }
    }
    if (joined)
      joined->push_back(i);
    else
      devices.push_back({i});
  }
  return devices;
}

template <typename Fn>
Result<MrHandle*> IbNetDevice::registerEach(bool dmaBuf, Fn&& one) {
  auto handle = std::make_unique<MrHandle>();
  handle->dmaBuf = dmaBuf;
  for (IbDevice* port : ports) {
    Result<MrEntry*> mr = one(*port);
    if (!mr.ok()) {
      deregister(handle.release());  // the ports registered so far
      return mr.status();
    }
    handle->entries[handle->count++] = mr.value();
  }
  return handle.release();
}

Result<MrHandle*> IbNetDevice::registerHost(void* data, size_t size) {
  return registerEach(false, [&](IbDevice& port) { return port.registerMemory(data, size); });
}

Result<MrHandle*> IbNetDevice::registerCuda(void* data, size_t size) {
  return registerEach(true, [&](IbDevice& port) { return registerCudaMemory(port, data, size); });
}

Result<MrHandle*> IbNetDevice::registerDmaBuf(void* data, size_t size, uint64_t offset, int fd) {
  return registerEach(true, [&](IbDevice& port) { return port.registerDmaBuf(data, size, offset, fd); });
}

void IbNetDevice::deregister(MrHandle* handle) {
  for (int i = 0; i < handle->count; ++i) ports[static_cast<size_t>(i)]->deregister(handle->entries[i]);
  delete handle;
}

}  // namespace weft::transport::ib
