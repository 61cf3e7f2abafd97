#include "transport/net/net_plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdarg>
#include <mutex>

#include "common/log.h"
#include "common/params.h"
#include "transport/net/socket_net.h"

namespace weft::transport {
namespace {

// Plugins log through this: their lines join Weft's, under NCCL_DEBUG.
void pluginLogger(weftNetLogLevel_t level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  const log::Level ours = level == WEFT_NET_LOG_WARN    ? log::Level::kWarn
                          : level == WEFT_NET_LOG_TRACE ? log::Level::kTrace
                          : level == WEFT_NET_LOG_INFO  ? log::Level::kInfo
                                                        : log::Level::kVersion;
  const uint32_t subsys = static_cast<uint32_t>(flags);
  if (!log::enabled(ours, subsys)) return;
  va_list args;
  va_start(args, fmt);
  const std::string text = strFormatV(fmt, args);
  va_end(args);
  log::write(ours, subsys, file, line, "%s", text.c_str());
}

// The library NCCL_NET_PLUGIN names: "none" disables plugins; a name without
// a slash or ".so" is libnccl-net-<name>.so; unset tries libnccl-net.so.
std::string pluginLibrary(const std::string& setting) {
  if (setting.empty()) return "libnccl-net.so";
  if (strcasecmp(setting.c_str(), "none") == 0) return "";
  if (setting.find('/') != std::string::npos || setting.find(".so") != std::string::npos) return setting;
  return "libnccl-net-" + setting + ".so";
}

// An external plugin, or an error when NCCL_NET_PLUGIN named one that cannot
// be used; a missing default library is not an error (null).
Result<const weftNet_v8_t*> loadExternal(const std::string& setting, std::string* library) {
  *library = pluginLibrary(setting);
  if (library->empty()) return static_cast<const weftNet_v8_t*>(nullptr);
  void* handle = dlopen(library->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (setting.empty()) return static_cast<const weftNet_v8_t*>(nullptr);
    return errorStatus(ncclSystemError, "NCCL_NET_PLUGIN=\"%s\": cannot load %s: %s", setting.c_str(),
                       library->c_str(), dlerror());
  }
  const void* table = dlsym(handle, "ncclNetPlugin_v8");
  if (table == nullptr) {
    const bool newer = dlsym(handle, "ncclNetPlugin_v10") || dlsym(handle, "ncclNetPlugin_v9");
    dlclose(handle);
    return errorStatus(ncclSystemError,
                       "network plugin %s exports no ncclNetPlugin_v8 table%s; Weft loads version 8 plugins. Unset "
                       "NCCL_NET_PLUGIN (or set it to none) to use the built-in socket network",
                       library->c_str(), newer ? " (only newer versions)" : "");
  }
  return static_cast<const weftNet_v8_t*>(table);  // the library stays loaded for the process
}

Result<Network> chooseNetwork() {
  Network net;
  WEFT_ASSIGN_OR_RETURN(const weftNet_v8_t* external, loadExternal(param::netPlugin(), &net.library));
  const std::string wanted = param::netName();
  const weftNet_v8_t* candidates[] = {external, &socketNet()};
  for (const weftNet_v8_t* api : candidates) {
    if (api == nullptr) continue;
    if (!wanted.empty() && strcasecmp(wanted.c_str(), api->name) != 0) continue;
    if (api->init(pluginLogger) != ncclSuccess || api->devices(&net.devices) != ncclSuccess || net.devices <= 0) {
      WEFT_INFO(log::kNet, "network %s is not usable here (%s)", api->name, networkLastError(net).c_str());
      continue;
    }
    net.api = api;
    net.external = api == external;
    WEFT_INFO(log::kNet | log::kInit, "Using network %s (%d devices)%s%s", api->name, net.devices,
              net.external ? " from " : "", net.external ? net.library.c_str() : "");
    return net;
  }
  return errorStatus(ncclSystemError, "no usable network%s%s%s (NCCL_SOCKET_IFNAME=\"%s\")",
                     wanted.empty() ? "" : " named NCCL_NET=", wanted.c_str(),
                     socketNetLastError().empty() ? "" : (": " + socketNetLastError()).c_str(),
                     param::socketIfname().c_str());
}

}  // namespace

Result<const Network*> network() {
  static std::once_flag once;
  static Result<Network> chosen = Status();
  std::call_once(once, [] { chosen = chooseNetwork(); });
  if (!chosen.ok()) return chosen.status();
  return &chosen.value();
}

std::string networkLastError(const Network& net) { return net.external ? std::string() : socketNetLastError(); }

}  // namespace weft::transport
