#include "common/plugin_lib.h"

#include <dlfcn.h>

#include <cstdarg>

#include "common/log.h"
#include "common/status.h"

namespace weft {
namespace {

bool endsWith(const std::string& s, const char* tail) {
  const std::string t(tail);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

}  // namespace

std::vector<std::string> pluginCandidateFiles(const std::string& name, const char* kind) {
  std::vector<std::string> files{name};
  const bool libraryName = name.rfind("lib", 0) == 0 && endsWith(name, ".so");
  if (name.find('/') == std::string::npos && !libraryName)
    files.push_back(strFormat("libnccl-%s-%s.so", kind, name.c_str()));
  return files;
}

void* openPluginLibrary(const std::string& name, const char* kind, std::string* library, std::string* why) {
  for (const std::string& file : pluginCandidateFiles(name, kind)) {
    if (void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *library = file;
      return handle;
    }
    const char* error = dlerror();
    *why += strFormat("%s%s", why->empty() ? "" : "; ", error ? error : ("cannot open " + file).c_str());
  }
  return nullptr;
}

void pluginLogV(int level, unsigned long flags, const char* file, int line, const char* fmt, va_list args) {
  const log::Level ours = level == 2   ? log::Level::kWarn
                          : level == 5 ? log::Level::kTrace
                          : level == 3 ? log::Level::kInfo
                                       : log::Level::kVersion;
  const uint32_t subsys = static_cast<uint32_t>(flags);
  if (!log::enabled(ours, subsys)) return;
  const std::string text = strFormatV(fmt, args);
  log::write(ours, subsys, file, line, "%s", text.c_str());
}

void pluginLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  pluginLogV(level, flags, file, line, fmt, args);
  va_end(args);
}

}  // namespace weft
