// Finding the ports the IB network uses: every active port of every HCA that
// NCCL_IB_HCA selects, with its address (LID, or for RoCE the GID that
// NCCL_IB_GID_INDEX / NCCL_IB_ADDR_FAMILY / NCCL_IB_ROCE_VERSION_NUM pick).
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "common/log.h"
#include "common/params.h"
#include "transport/net/ib/ib_device.h"

namespace weft::transport::ib {
namespace {

// The RoCE version the kernel gives a GID (sysfs), 0 when it does not say.
int gidRoceVersion(const std::string& device, int port, int index) {
  std::ifstream in("/sys/class/infiniband/" + device + "/ports/" + std::to_string(port) + "/gid_attrs/types/" +
                   std::to_string(index));
  std::string type;
  if (!std::getline(in, type)) return 0;
  return type.find("v2") != std::string::npos ? 2 : 1;
}

// The GID index a port uses; -1 when RoCE finds none that fits.
int gidIndexFor(const Verbs& v, IbDevice& d, int tableLength) {
  const int64_t forced = param::ibGidIndex();
  if (forced >= 0) return static_cast<int>(forced);
  if (!d.ethernet) return 0;
  std::vector<GidCandidate> table;
  for (int i = 0; i < std::min(tableLength, 256); ++i) {
    GidCandidate c;
    c.index = i;
    if (v.queryGid(d.context, static_cast<uint8_t>(d.port), i, &c.gid) != 0) continue;
    c.rocev = gidRoceVersion(d.name, d.port, i);
    table.push_back(c);
  }
  const int family = param::ibAddrFamily() == "AF_INET6" ? AF_INET6 : AF_INET;
  return chooseGidIndex(table, family, static_cast<int>(param::ibRoceVersionNum()));
}

bool relaxedOrderingFor(const Verbs& v) {
  const int64_t setting = param::ibPciRelaxedOrdering();
  if (setting == 0) return false;
  if (v.regMrIova2 == nullptr && setting == 1)
    WEFT_INFO(log::kNet | log::kInit, "NET/IB: NCCL_IB_PCI_RELAXED_ORDERING=1 but %s cannot register with it",
              v.source);
  return v.regMrIova2 != nullptr;
}

// One port as a network device, or null (and why, at INFO) when unusable.
std::unique_ptr<IbDevice> openPort(const Verbs& v, const std::shared_ptr<void>& owner, ibv_context* context,
                                   const std::string& name, const std::string& pciPath, const ibv_device_attr& attr,
                                   int port) {
  ibv_port_attr pa{};
  if (v.queryPort(context, static_cast<uint8_t>(port), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) return nullptr;
  if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) return nullptr;
  auto d = std::make_unique<IbDevice>();
  d->name = name;
  d->port = port;
  d->context = context;
  d->contextOwner = owner;
  d->guid = attr.node_guid;
  d->lid = pa.lid;
  d->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  d->mtu = pa.active_mtu;
  d->speedMbps = portSpeedMbps(pa.active_speed, pa.active_width);
  d->pciPath = pciPath;
  d->maxQp = attr.max_qp;
  d->relaxedOrdering = relaxedOrderingFor(v);
  d->gidIndex = gidIndexFor(v, *d, pa.gid_tbl_len);
  if (d->gidIndex < 0 || v.queryGid(context, static_cast<uint8_t>(port), d->gidIndex, &d->gid) != 0) {
    WEFT_INFO(log::kNet | log::kInit,
              "NET/IB: %s:%d has no GID matching NCCL_IB_ADDR_FAMILY/ROCE_VERSION_NUM; not used", name.c_str(), port);
    return nullptr;
  }
  d->pd = v.allocPd(context);
  if (d->pd == nullptr) return nullptr;
  return d;
}

void probeDevice(const Verbs& v, ibv_device* device, const HcaFilter& filter,
                 std::vector<std::unique_ptr<IbDevice>>* out) {
  const std::string name = v.getDeviceName(device);
  ibv_context* context = v.openDevice(device);
  if (context == nullptr) {
    WEFT_INFO(log::kNet | log::kInit, "NET/IB: cannot open %s: %s", name.c_str(), std::strerror(errno));
    return;
  }
  const Verbs* table = &v;
  std::shared_ptr<void> owner(context, [table](void* c) { (void)table->closeDevice(static_cast<ibv_context*>(c)); });
  ibv_device_attr attr{};
  if (v.queryDevice(context, &attr) != 0) return;
  const std::string pciPath = v.devicePciPath(device);
  for (int port = 1; port <= attr.phys_port_cnt; ++port) {
    if (!hcaSelected(filter, name, port)) continue;
    if (std::unique_ptr<IbDevice> d = openPort(v, owner, context, name, pciPath, attr, port))
      out->push_back(std::move(d));
  }
}

}  // namespace

const std::vector<std::unique_ptr<IbDevice>>& ibPorts(std::string* why) {
  static std::once_flag once;
  // Never destroyed: a proxy thread may still use a port while the process exits.
  static auto* ports = new std::vector<std::unique_ptr<IbDevice>>();
  static std::string failure;
  std::call_once(once, [] {
    const Verbs* v = verbs(&failure);
    if (v == nullptr) return;
    int count = 0;
    ibv_device** list = v->getDeviceList(&count);
    if (list == nullptr || count == 0) {
      failure = strFormat("%s lists no RDMA devices", v->source);
      if (list) v->freeDeviceList(list);
      return;
    }
    const HcaFilter filter = parseHcaFilter(param::ibHca());
    for (int i = 0; i < count; ++i) probeDevice(*v, list[i], filter, ports);
    v->freeDeviceList(list);
    if (ports->empty())
      failure =
          strFormat("no active port among %d RDMA devices matches NCCL_IB_HCA=\"%s\"", count, param::ibHca().c_str());
    for (const auto& d : *ports)
      WEFT_INFO(log::kNet | log::kInit, "NET/IB: %s %s, %d Mb/s, GID index %d, %s (%s)", d->label().c_str(),
                d->ethernet ? "RoCE" : "InfiniBand", d->speedMbps, d->gidIndex,
                d->pciPath.empty() ? "no PCI path" : d->pciPath.c_str(), v->source);
  });
  if (ports->empty() && why) *why = failure;
  return *ports;
}

const std::vector<std::unique_ptr<IbNetDevice>>& ibDevices(std::string* why) {
  static std::once_flag once;
  static auto* devices = new std::vector<std::unique_ptr<IbNetDevice>>();  // never destroyed, as the ports
  std::call_once(once, [] {
    const auto& ports = ibPorts(nullptr);
    std::vector<PortPlacement> placements;
    for (const auto& p : ports) placements.push_back({p->pciPath, p->ethernet});
    const bool merge = param::ibMergeNics() != 0;
    for (const std::vector<int>& group : mergePorts(placements, merge, param::ibMergeVfs() != 0)) {
      auto d = std::make_unique<IbNetDevice>();
      for (int i : group) {
        IbDevice* port = ports[static_cast<size_t>(i)].get();
        d->name += (d->ports.empty() ? "" : "+") + port->name;
        d->ports.push_back(port);
        d->speedMbps += port->speedMbps;
      }
      if (group.size() > 1) {
        std::string labels;
        for (const IbDevice* port : d->ports) labels += (labels.empty() ? "" : ", ") + port->label();
        WEFT_INFO(log::kNet | log::kInit,
                  "NET/IB: network device %zu is %s: ports %s of one NIC merged (NCCL_IB_MERGE_NICS=1), %d Mb/s",
                  devices->size(), d->name.c_str(), labels.c_str(), d->speedMbps);
      }
      devices->push_back(std::move(d));
    }
  });
  if (devices->empty()) (void)ibPorts(why);
  return *devices;
}

}  // namespace weft::transport::ib
