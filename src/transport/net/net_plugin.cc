#include "transport/net/net_plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdarg>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "common/params.h"
#include "common/plugin_lib.h"
#include "transport/net/ib/ib_net.h"
#include "transport/net/socket_net.h"

namespace weft::transport {
namespace {

// Plugins log through this: their lines join Weft's, under NCCL_DEBUG.
void pluginLogger(weftNetLogLevel_t level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  pluginLogV(static_cast<int>(level), flags, file, line, fmt, args);
  va_end(args);
}

std::string versionSymbol(const char* kind, int version) { return strFormat("nccl%sNetPlugin_v%d", kind, version); }

// The first of versions [from, to], newest first, whose `kind` table the
// library exports (0: none).
int newestExported(void* handle, const char* kind, int from, int to) {
  for (int v = to; v >= from; --v)
    if (dlsym(handle, versionSymbol(kind, v).c_str()) != nullptr) return v;
  return 0;
}

// Why a library holds no table Weft can use, most telling reason first.
std::string missingTableReason(void* handle, const std::string& library) {
  if (int newer = newestExported(handle, "", kNetNewestVersion + 1, kNetNewestVersion + 20))
    return strFormat("%s exports only ncclNetPlugin_v%d, newer than the newest Weft loads (v%d)", library.c_str(),
                     newer, kNetNewestVersion);
  if (int older = newestExported(handle, "", 2, kNetOldestVersion - 1))
    return strFormat("%s exports only ncclNetPlugin_v%d, older than the oldest Weft loads (v%d)", library.c_str(),
                     older, kNetOldestVersion);
  if (int coll = newestExported(handle, "Coll", 2, kNetNewestVersion + 20))
    return strFormat("%s exports only a CollNet table (ncclCollNetPlugin_v%d); Weft has no CollNet support",
                     library.c_str(), coll);
  return strFormat("%s exports no ncclNetPlugin_v%d..v%d table", library.c_str(), kNetOldestVersion, kNetNewestVersion);
}

// Initialises the network and checks it has a device Weft can drive.
std::string initialise(Network* net) {
  NetApi& api = *net->api;
  ncclResult_t rc = api.init(pluginLogger);
  if (rc != ncclSuccess) return strFormat("its init returned %s", resultName(rc));
  rc = api.devices(&net->devices);
  if (rc != ncclSuccess) return strFormat("its devices() returned %s", resultName(rc));
  if (net->devices <= 0) return "it reports no network devices";
  NetProperties props;
  rc = api.getProperties(0, &props);
  if (rc != ncclSuccess) return strFormat("its getProperties(0) returned %s", resultName(rc));
  if (props.deviceType != WEFT_NET_DEVICE_HOST)
    return strFormat("its devices need device-side offload (type %d), which Weft does not drive",
                     static_cast<int>(props.deviceType));
  if (!(props.ptrSupport & kNetPtrHost)) return "its devices cannot use host memory, which Weft registers";
  return "";
}

}  // namespace

PluginLoad loadNetPlugin(const std::string& name) {
  PluginLoad load;
  std::string why;
  void* handle = openPluginLibrary(name, "net", &load.net.library, &why);
  if (handle == nullptr) {
    load.failure = strFormat("cannot load it: %s", why.c_str());
    return load;
  }
  const int version = newestExported(handle, "", kNetOldestVersion, kNetNewestVersion);
  if (version == 0) {
    load.failure = missingTableReason(handle, load.net.library);
    return load;  // the library stays loaded: unloading plugins is not safe in general
  }
  if (int coll = newestExported(handle, "Coll", 2, kNetNewestVersion + 20))
    WEFT_INFO(log::kNet | log::kInit,
              "NET/Plugin: %s also exports ncclCollNetPlugin_v%d; Weft has no CollNet support and does not use it",
              load.net.library.c_str(), coll);
  load.net.api = adaptNetTable(version, dlsym(handle, versionSymbol("", version).c_str()));
  load.net.external = true;
  const std::string problem = initialise(&load.net);
  if (!problem.empty()) {
    load.failure = strFormat("network %s (ncclNetPlugin_v%d from %s) is not usable: %s", load.net.api->name(), version,
                             load.net.library.c_str(), problem.c_str());
    return load;
  }
  WEFT_INFO(log::kNet | log::kInit, "NET/Plugin: loaded %s from %s (ncclNetPlugin_v%d, %d devices)",
            load.net.api->name(), load.net.library.c_str(), version, load.net.devices);
  return load;
}

namespace {

// NCCL_NET_PLUGIN as a list of names to try in order; `requested` when the
// user set it (a failure is then a warning, not a quiet fallback).
struct PluginSetting {
  std::vector<std::string> names;
  bool requested = false;
};

PluginSetting pluginSetting() {
  const std::string setting = param::netPlugin();
  if (setting.empty()) return {{"libnccl-net.so"}, false};
  PluginSetting out{{}, true};
  if (strcasecmp(setting.c_str(), "none") == 0) return out;
  size_t begin = 0;
  while (begin <= setting.size()) {
    size_t end = setting.find(',', begin);
    if (end == std::string::npos) end = setting.size();
    if (end > begin) out.names.push_back(setting.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

Result<Network> socketNetwork() {
  Network net;
  net.api = adaptNetTable(8, &socketNet());
  if (net.api->init(pluginLogger) != ncclSuccess || net.api->devices(&net.devices) != ncclSuccess || net.devices <= 0)
    return errorStatus(
        ncclSystemError, "no usable network: the Socket network found no interface%s%s (NCCL_SOCKET_IFNAME=\"%s\")",
        socketNetLastError().empty() ? "" : ": ", socketNetLastError().c_str(), param::socketIfname().c_str());
  return net;
}

// The built-in IB network, when it finds an active HCA port.
Result<Network> ibNetwork() {
  Network net;
  net.api = adaptNetTable(8, &ibNet());
  if (net.api->init(pluginLogger) != ncclSuccess || net.api->devices(&net.devices) != ncclSuccess || net.devices <= 0)
    return errorStatus(ncclSystemError, "the IB network is not usable: %s", ibNetLastError().c_str());
  return net;
}

// NCCL_NET named a network no plugin provided: an error saying which
// requested plugins failed and why, or that nothing has that name.
Status unknownNetwork(const std::string& wanted, const std::vector<std::string>& failures,
                      const std::vector<std::string>& seen) {
  if (!failures.empty()) {
    std::string why;
    for (const std::string& f : failures) why += (why.empty() ? "" : "; ") + f;
    return errorStatus(ncclSystemError,
                       "NCCL_NET=%s: the network plugin asked for cannot be used: %s. Fix NCCL_NET_PLUGIN, or unset "
                       "NCCL_NET to fall back to the built-in Socket network",
                       wanted.c_str(), why.c_str());
  }
  std::string names = param::ibDisable() == 0 && ibNetwork().ok() ? "IB, Socket" : "Socket";
  for (const std::string& n : seen) names += ", " + n;
  return errorStatus(ncclInvalidUsage, "NCCL_NET=%s names no network here (networks: %s)", wanted.c_str(),
                     names.c_str());
}

Result<Network> chooseNetwork() {
  const PluginSetting setting = pluginSetting();
  const std::string wanted = param::netName();
  std::vector<std::string> failures;
  std::vector<std::string> seen;  // networks that loaded but NCCL_NET passed over
  for (const std::string& name : setting.names) {
    PluginLoad load = loadNetPlugin(name);
    if (!load.failure.empty()) {
      if (setting.requested) {
        WEFT_WARN("NET/Plugin: NCCL_NET_PLUGIN=%s: %s; not using it", name.c_str(), load.failure.c_str());
        failures.push_back(strFormat("%s: %s", name.c_str(), load.failure.c_str()));
      } else {
        WEFT_INFO(log::kNet | log::kInit, "NET/Plugin: no plugin in use (%s)", load.failure.c_str());
      }
      continue;
    }
    if (!wanted.empty() && strcasecmp(wanted.c_str(), load.net.api->name()) != 0) {
      seen.push_back(load.net.api->name());
      continue;
    }
    WEFT_INFO(log::kNet | log::kInit, "Using network %s (%d devices) from %s", load.net.api->name(), load.net.devices,
              load.net.library.c_str());
    return std::move(load.net);
  }
  const bool wantsIb = strcasecmp(wanted.c_str(), "IB") == 0;
  if (wantsIb && param::ibDisable() != 0)
    return errorStatus(ncclInvalidUsage, "NCCL_NET=IB asks for the IB network, which NCCL_IB_DISABLE=%lld turns off",
                       static_cast<long long>(param::ibDisable()));
  if ((wanted.empty() || wantsIb) && param::ibDisable() == 0) {
    Result<Network> ib = ibNetwork();
    if (ib.ok()) {
      WEFT_INFO(log::kNet | log::kInit, "Using network IB (%d devices)", ib.value().devices);
      return ib;
    }
    if (wantsIb) return ib.status().withContext("NCCL_NET=IB");
    WEFT_INFO(log::kNet | log::kInit, "NET/IB: not used (%s)", ib.status().message().c_str());
  }
  if (!wanted.empty() && strcasecmp(wanted.c_str(), "Socket") != 0) return unknownNetwork(wanted, failures, seen);
  WEFT_ASSIGN_OR_RETURN(Network net, socketNetwork());
  WEFT_INFO(log::kNet | log::kInit, "Using network Socket (%d devices)", net.devices);
  return net;
}

}  // namespace

Result<const Network*> network() {
  static std::once_flag once;
  static Result<Network> chosen = Status();
  std::call_once(once, [] { chosen = chooseNetwork(); });
  if (!chosen.ok()) return chosen.status();
  return &chosen.value();
}

std::string networkLastError(const Network& net) {
  if (net.external) return std::string();
  return std::strcmp(net.api->name(), "IB") == 0 ? ibNetLastError() : socketNetLastError();
}

}  // namespace weft::transport
