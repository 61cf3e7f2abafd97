#include "graph/detect.h"

#include <map>

#include "graph/gpu_probe.h"
#include "graph/machine.h"
#include "graph/nic_probe.h"

namespace weft::graph {
namespace {

void setPciAttrs(XmlNode* x, const PciAttrs& a) {
  x->set("busid", a.busId);
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) x->set(key, v);
  };
  put("class", a.cls);
  put("vendor", a.vendor);
  put("device", a.device);
  put("subsystem_vendor", a.subVendor);
  put("subsystem_device", a.subDevice);
  put("link_speed", a.linkSpeed);
  put("link_width", a.linkWidth);
}

// Builds <system>: one <cpu> per NUMA node, and <pci> elements created on
// demand for the devices placed, sharing the switches above them.
class SystemXml {
 public:
  SystemXml(const MachineInfo& primary, const MachineInfo* fallback) : primary_(primary), fallback_(fallback) {
    root_ = std::make_unique<XmlNode>();
    root_->name = "system";
    root_->set("version", "1");
    for (const CpuInfo& c : primary.cpus()) {
      XmlNode* x = root_->add("cpu");
      x->set("numaid", std::to_string(c.numa));
      if (!c.affinity.empty()) x->set("affinity", c.affinity);
      if (!c.arch.empty()) x->set("arch", c.arch);
      if (!c.vendor.empty()) x->set("vendor", c.vendor);
      if (!c.family.empty()) x->set("familyid", c.family);
      if (!c.model.empty()) x->set("modelid", c.model);
      cpus_[c.numa] = x;
    }
  }

  XmlNode* cpu(int numa) {
    auto it = cpus_.find(numa);
    return it != cpus_.end() ? it->second : cpus_.begin()->second;
  }

  // The <pci> element of a device, with its switches, under its CPU.
  XmlNode* pci(const std::string& busId) {
    if (auto it = pcis_.find(busId); it != pcis_.end()) return it->second;
    PciPlace place;
    if (!primary_.locate(busId, &place) && !(fallback_ && fallback_->locate(busId, &place))) {
      place = PciPlace{};
      place.self.busId = busId;
    }
    XmlNode* parent = cpu(place.numa);
    for (const PciAttrs& s : place.switches) parent = child(parent, s);
    return child(parent, place.self);
  }

  std::unique_ptr<XmlNode> release() { return std::move(root_); }

 private:
  XmlNode* child(XmlNode* parent, const PciAttrs& a) {
    if (auto it = pcis_.find(a.busId); it != pcis_.end()) return it->second;
    XmlNode* x = parent->add("pci");
    setPciAttrs(x, a);
    return pcis_[a.busId] = x;
  }

  const MachineInfo& primary_;
  const MachineInfo* fallback_;
  std::unique_ptr<XmlNode> root_;
  std::map<int, XmlNode*> cpus_;
  std::map<std::string, XmlNode*> pcis_;
};

void addGpu(SystemXml& sys, const GpuInfo& g, int rank) {
  XmlNode* gpu = sys.pci(g.busId)->add("gpu");
  gpu->set("dev", std::to_string(g.ordinal));
  gpu->set("sm", std::to_string(g.sm));
  gpu->set("rank", std::to_string(rank));
  gpu->set("gdr", "0");
  for (const NvlinkInfo& l : g.nvlinks) {
    XmlNode* nv = gpu->add("nvlink");
    nv->set("target", l.target);
    nv->set("count", std::to_string(l.count));
    nv->set("tclass", l.tclass);
  }
}

void addNet(SystemXml& sys, const NetInfo& n, int dev) {
  XmlNode* nic = nullptr;
  if (n.busId.empty()) {
    nic = sys.cpu(n.numa)->add("nic");  // virtual: no PCI device, it hangs from the CPU
  } else {
    XmlNode* pci = sys.pci(n.busId);
    for (const auto& c : pci->children)
      if (c->name == "nic") nic = c.get();
    if (nic == nullptr) nic = pci->add("nic");
  }
  XmlNode* net = nic->add("net");
  net->set("name", n.name);
  net->set("dev", std::to_string(dev));
  net->set("speed", std::to_string(n.speedMbps));
  net->set("port", std::to_string(n.port));
  net->set("latency", "0.000000");
  net->set("guid", n.guid.empty() ? "0x" + std::to_string(dev + 1) : n.guid);
  net->set("maxconn", "65536");
  net->set("gdr", "0");
}

GpuProbeResult probeLocalGpus(const DetectOptions& o) {
  std::unique_ptr<CudaDriverApi> ownCuda;
  std::unique_ptr<NvmlApi> ownNvml;
  CudaDriverApi* cuda = o.cuda;
  NvmlApi* nvml = o.nvml;
  if (cuda == nullptr && o.loadLibraries) cuda = (ownCuda = loadCudaDriver()).get();
  if (nvml == nullptr && o.loadLibraries) nvml = (ownNvml = loadNvml()).get();
  if (cuda == nullptr) return GpuProbeResult{{}, "no CUDA driver (libcuda.so.1): no GPUs; "};
  GpuProbeResult r = probeGpus(*cuda, nvml, o.cudaDevices);
  if (nvml == nullptr && !r.gpus.empty() && r.note.find("NVML") == std::string::npos)
    r.note += "no NVML (libnvidia-ml.so.1): no NVLinks; ";
  return r;
}

}  // namespace

Result<DetectResult> detectSystem(const DetectOptions& o) {
  DetectResult r;
  const Sysfs sysfs(o.sysfsRoot);
  std::unique_ptr<MachineInfo> fallback = sysfsMachine(sysfs);
  std::unique_ptr<MachineInfo> primary;
  if (o.useHwloc) {
    auto hw = hwlocMachine(o.hwlocXml, sysfs);
    if (hw.ok())
      primary = std::move(hw).value();
    else
      r.notes += hw.status().message() + "; using sysfs; ";
  }
  const MachineInfo& machine = primary ? *primary : *fallback;
  r.machineSource = machine.name();
  SystemXml sys(machine, primary ? fallback.get() : nullptr);
  GpuProbeResult gpus = probeLocalGpus(o);
  r.notes += gpus.note;
  for (const GpuInfo& g : gpus.gpus) addGpu(sys, g, o.rank);
  std::vector<NetInfo> nets = probeIbNets(sysfs);
  if (nets.empty()) nets = probeSocketNets(sysfs, o.netInterfaces);
  for (size_t i = 0; i < nets.size(); ++i) addNet(sys, nets[i], static_cast<int>(i));
  r.gpus = static_cast<int>(gpus.gpus.size());
  r.nets = static_cast<int>(nets.size());
  r.xml = sys.release();
  while (!r.notes.empty() && (r.notes.back() == ' ' || r.notes.back() == ';')) r.notes.pop_back();
  return r;
}

}  // namespace weft::graph
