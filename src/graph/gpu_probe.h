// GPUs as the CUDA driver and NVML describe them: bus id, compute
// capability, and NVLinks grouped by what is at the other end (a GPU, an
// NVSwitch, a CPU). Pure logic over the interfaces of gpu_api.h.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "graph/gpu_api.h"

namespace weft::graph {

// tclass values of NCCL's <nvlink> element: the PCI class of the far end.
constexpr const char* kNvlinkGpuClass = "0x030200";
constexpr const char* kNvlinkSwitchClass = "0x068000";
constexpr const char* kNvlinkCpuClass = "0x060000";

struct NvlinkInfo {
  std::string target;  // normalised bus id of the far end
  std::string tclass;  // kNvlink*Class
  int count = 0;       // links to that end
};

struct GpuInfo {
  int ordinal = -1;   // CUDA device index in this process
  std::string busId;  // normalised
  int sm = 0;         // compute capability x 10
  std::vector<NvlinkInfo> nvlinks;
};

struct GpuProbeResult {
  std::vector<GpuInfo> gpus;
  std::string note;  // what was missing or failed, for the log (empty: all well)
};

// The GPUs with the given CUDA ordinals (empty: all), in ordinal order.
// `nvml` may be null (no NVLinks then). A driver that fails to initialise
// gives no GPUs and a note, not an error: a machine without GPUs is fine.
GpuProbeResult probeGpus(CudaDriverApi& cuda, NvmlApi* nvml, const std::vector<int>& ordinals);

// The NVLinks of one GPU. `gpuBusIds` are the GPUs known on this host: when
// NVML cannot say what a link reaches, a known GPU is a GPU and anything
// else an NVSwitch (NVSwitches are not NVML devices).
std::vector<NvlinkInfo> probeNvlinks(NvmlApi& nvml, const std::string& busId, const std::vector<std::string>& gpuBusIds,
                                     std::string* note);

}  // namespace weft::graph
