#include "common/params.h"

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>

#include "common/log.h"

namespace weft::param {
namespace {

// NCCL semantics: NAME=VALUE lines of the configuration files set variables
// the environment does not already define. Loaded once per process.
void loadConfFile(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    size_t eq = line.find('=', start);
    if (eq == std::string::npos) continue;
    std::string key = line.substr(start, eq - start);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(eq + 1);
    size_t vstart = value.find_first_not_of(" \t");
    value = vstart == std::string::npos ? "" : value.substr(vstart);
    while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
    if (!key.empty()) setenv(key.c_str(), value.c_str(), /*overwrite=*/0);
  }
}

void loadConfFilesOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char* explicitFile = std::getenv("NCCL_CONF_FILE")) loadConfFile(explicitFile);
    if (const char* home = std::getenv("HOME")) loadConfFile(std::string(home) + "/.nccl.conf");
    loadConfFile("/etc/nccl.conf");
  });
}

// NCCL's ENV line for a variable the environment (or a configuration file)
// sets, written the first time the variable is read. Integers end with a
// full stop and show the parsed value, as NCCL's do.
void reportSet(const char* name, const std::string& shown) {
  if (!log::enabled(log::Level::kInfo, log::kEnv)) return;
  static std::mutex mutex;
  static std::set<std::string>* reported = new std::set<std::string>();  // outlives static destructors
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!reported->insert(name).second) return;
  }
  WEFT_INFO(log::kEnv, "%s set by environment to %s", name, shown.c_str());
}

int64_t readInt(const char* name, int64_t def) {
  std::optional<std::string> text = raw(name);
  if (!text || text->empty()) return def;
  std::optional<int64_t> value = parseInt(*text);
  if (!value) {
    WEFT_WARN("%s=\"%s\" is not an integer; using the default %lld", name, text->c_str(), static_cast<long long>(def));
    return def;
  }
  reportSet(name, std::to_string(*value) + ".");
  return *value;
}

std::string readStr(const char* name, const char* def) {
  std::optional<std::string> text = raw(name);
  if (!text) return std::string(def);
  reportSet(name, *text);
  return *text;
}

}  // namespace

std::optional<std::string> raw(const char* name) {
  loadConfFilesOnce();
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::optional<int64_t> parseInt(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str()) return std::nullopt;
  int64_t scale = 1;
  if (*end == 'k' || *end == 'K')
    scale = 1ll << 10, ++end;
  else if (*end == 'm' || *end == 'M')
    scale = 1ll << 20, ++end;
  else if (*end == 'g' || *end == 'G')
    scale = 1ll << 30, ++end;
  if (*end != '\0') return std::nullopt;
  return static_cast<int64_t>(value) * scale;
}

#define WEFT_PARAM_INT(accessor, name, def, doc) \
  int64_t accessor() { return readInt(name, def); }
#define WEFT_PARAM_STR(accessor, name, def, doc) \
  std::string accessor() { return readStr(name, def); }
#include "common/param_table.inc"
#undef WEFT_PARAM_INT
#undef WEFT_PARAM_STR

const std::vector<Info>& all() {
  static const std::vector<Info> table = {
#define WEFT_PARAM_INT(accessor, name, def, doc) {name, "int", std::to_string(def), doc},
#define WEFT_PARAM_STR(accessor, name, def, doc) {name, "string", std::string(def), doc},
#include "common/param_table.inc"
#undef WEFT_PARAM_INT
#undef WEFT_PARAM_STR
  };
  return table;
}

std::string markdownTable() {
  std::string out =
      "# Environment variables\n\n"
      "Generated from `src/common/param_table.inc` by `weft-params --markdown`; do not edit by hand.\n\n"
      "`NCCL_*` variables keep NCCL's meaning and syntax; `WEFT_*` variables are Weft's own. Values may\n"
      "also come from `NCCL_CONF_FILE`, `~/.nccl.conf` and `/etc/nccl.conf` (`NAME=VALUE` lines); the\n"
      "environment always wins. An integer default of -1 means Weft chooses at run time, as described.\n\n"
      "| Variable | Type | Default | Meaning |\n|---|---|---|---|\n";
  for (const Info& info : all()) {
    std::string def = info.defaultText.empty() ? "(unset)" : "`" + info.defaultText + "`";
    out += std::string("| `") + info.name + "` | " + info.type + " | " + def + " | " + info.doc + " |\n";
  }
  return out;
}

}  // namespace weft::param
