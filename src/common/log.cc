#include "common/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <strings.h>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "common/params.h"
#include "common/status.h"

namespace weft::log {
namespace detail {
std::atomic<int> gLevel{-1};
std::atomic<uint32_t> gSubsys{0};
}  // namespace detail

namespace {

struct State {
  std::mutex mutex;  // serialises lines and (re)initialisation
  FILE* out = stdout;
  bool ownsFile = false;
  char host[64] = {0};
  std::chrono::steady_clock::time_point epoch;  // TRACE lines print ms since this
};

State& state() {
  static State* s = new State();  // never destroyed: logging works during exit
  return *s;
}

thread_local int tlsRank = -1;

// The logger's own settings are read without going through the parameter
// accessors: those report "set by environment" lines, which would re-enter
// the logger while it initialises.
std::string setting(const char* name) {
  if (std::optional<std::string> value = param::raw(name)) return *value;
  for (const param::Info& info : param::all())
    if (std::strcmp(info.name, name) == 0) return info.defaultText;
  return "";
}

Level parseLevel(const std::string& text) {
  if (strcasecmp(text.c_str(), "VERSION") == 0) return Level::kVersion;
  if (strcasecmp(text.c_str(), "WARN") == 0) return Level::kWarn;
  if (strcasecmp(text.c_str(), "INFO") == 0) return Level::kInfo;
  if (strcasecmp(text.c_str(), "TRACE") == 0) return Level::kTrace;
  return Level::kNone;
}

uint32_t subsysBit(const std::string& name) {
  static const struct {
    const char* name;
    uint32_t bit;
  } kNames[] = {{"INIT", kInit},   {"COLL", kColl},           {"P2P", kP2p}, {"SHM", kShm},     {"NET", kNet},
                {"GRAPH", kGraph}, {"TUNING", kTuning},       {"ENV", kEnv}, {"ALLOC", kAlloc}, {"CALL", kCall},
                {"PROXY", kProxy}, {"BOOTSTRAP", kBootstrap}, {"ALL", kAll}};
  for (const auto& entry : kNames)
    if (strcasecmp(entry.name, name.c_str()) == 0) return entry.bit;
  return 0;
}

std::string expandFileName(const std::string& pattern, const char* host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'h')
        out += host;
      else if (c == 'p')
        out += std::to_string(getpid());
      else if (c == '%')
        out += '%';
      else
        out += std::string("%") + c;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

void initLocked(State& s) {
  gethostname(s.host, sizeof(s.host) - 1);
  if (char* dot = std::strchr(s.host, '.')) *dot = '\0';
  if (s.ownsFile && s.out) std::fclose(s.out);
  s.out = stdout;
  s.ownsFile = false;
  s.epoch = std::chrono::steady_clock::now();
  const Level lvl = parseLevel(setting("NCCL_DEBUG"));
  const std::string file = setting("NCCL_DEBUG_FILE");
  // As NCCL: the file is opened only for levels that write more than the banner.
  if (!file.empty() && lvl > Level::kVersion) {
    const std::string path = expandFileName(file, s.host);
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      setlinebuf(f);
      s.out = f;
      s.ownsFile = true;
    }
  }
  detail::gSubsys.store(parseSubsys(setting("NCCL_DEBUG_SUBSYS").c_str()), std::memory_order_relaxed);
  detail::gLevel.store(static_cast<int>(lvl), std::memory_order_release);
}

Level loadLevel() {
  int lvl = detail::gLevel.load(std::memory_order_acquire);
  if (lvl >= 0) return static_cast<Level>(lvl);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (detail::gLevel.load(std::memory_order_relaxed) < 0) initLocked(s);
  return static_cast<Level>(detail::gLevel.load(std::memory_order_relaxed));
}

const char* baseName(const char* file) {
  const char* base = std::strrchr(file, '/');
  return base ? base + 1 : file;
}

// Everything before the message, in NCCL's layout for the level.
std::string prefix(const State& s, Level lvl, uint32_t subsys, const char* file, int line) {
  if (lvl == Level::kVersion) return "";
  const std::string who = strFormat("%s:%d:%ld ", s.host, static_cast<int>(getpid()), syscall(SYS_gettid));
  if (lvl == Level::kTrace && subsys == kCall) return who + "NCCL CALL ";
  const std::string rank = tlsRank >= 0 ? std::to_string(tlsRank) : std::string("-");
  if (lvl == Level::kWarn) return who + strFormat("[%s] %s:%d NCCL WARN ", rank.c_str(), baseName(file), line);
  if (lvl == Level::kTrace) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s.epoch).count();
    return who + strFormat("[%s] %f %s:%d NCCL TRACE ", rank.c_str(), ms, baseName(file), line);
  }
  return who + "[" + rank + "] NCCL INFO ";
}

}  // namespace

namespace detail {
bool enabledSlow(Level lvl, uint32_t subsys) {
  loadLevel();
  return enabled(lvl, subsys);
}
}  // namespace detail

uint32_t parseSubsys(const char* textIn) {
  std::string text = textIn;
  bool invert = !text.empty() && text[0] == '^';
  if (invert) text.erase(0, 1);
  uint32_t mask = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    mask |= subsysBit(text.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  initLocked(s);
}

Level level() { return loadLevel(); }

int currentRank() { return tlsRank; }
void setCurrentRank(int rank) { tlsRank = rank; }

void write(Level lvl, uint32_t subsys, const char* file, int line, const char* fmt, ...) {
  State& s = state();
  va_list args;
  va_start(args, fmt);
  std::string message = strFormatV(fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(s.mutex);
  const std::string head = prefix(s, lvl, subsys, file, line);
  std::fprintf(s.out, "%s%s\n", head.c_str(), message.c_str());
  std::fflush(s.out);
}

}  // namespace weft::log
