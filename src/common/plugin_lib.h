// Opening plugin libraries the way NCCL names them (NCCL_NET_PLUGIN,
// NCCL_TUNER_PLUGIN), and the logger plugins are given.
#pragma once

#include <cstdarg>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace weft {

// The files NCCL would try for `name`, in order: the name itself (a path, or
// a file the dynamic loader searches), then, for a bare name (no '/', not
// lib*.so), libnccl-<kind>-<name>.so.
std::vector<std::string> pluginCandidateFiles(const std::string& name, const char* kind);

// The handle of the first candidate that opens (the library stays loaded for
// the process: unloading plugins is not safe in general) and its file name,
// or null with every candidate's dlerror in *why.
void* openPluginLibrary(const std::string& name, const char* kind, std::string* library, std::string* why);

// What `load` gives for `key` (a plugin's setting), computed once per
// process and setting and kept, as the library it loaded stays loaded:
// tests change the setting, a job does not.
template <typename T, typename Load>
const T& loadOncePerSetting(const std::string& key, Load&& load) {
  static std::mutex mutex;
  static std::map<std::string, T> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = loaded.find(key);
  if (found != loaded.end()) return found->second;
  return loaded[key] = load();
}

// The logger NCCL passes to plugins (ncclDebugLogger_t): level numbered as
// ncclDebugLogLevel (1 version, 2 warn, 3 info, 5 trace), flags as NCCL's
// subsystems. Lines join Weft's log under NCCL_DEBUG.
void pluginLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
void pluginLogV(int level, unsigned long flags, const char* file, int line, const char* fmt, va_list args);

}  // namespace weft
