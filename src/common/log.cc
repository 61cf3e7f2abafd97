#include "common/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <strings.h>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "common/params.h"
#include "common/status.h"

namespace weft::log {
namespace {

struct State {
  std::mutex mutex;            // serialises lines and (re)initialisation
  std::atomic<int> level{-1};  // -1: not yet read from the environment
  std::atomic<uint32_t> subsys{0};
  FILE* out = stdout;
  bool ownsFile = false;
  char host[64] = {0};
};

State& state() {
  static State* s = new State();  // never destroyed: logging works during exit
  return *s;
}

thread_local int tlsRank = -1;

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

uint32_t parseSubsys(std::string text) {
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
  std::string file = param::debugFile();
  if (!file.empty()) {
    std::string path = expandFileName(file, s.host);
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      s.out = f;
      s.ownsFile = true;
    }
  }
  s.subsys.store(parseSubsys(param::debugSubsys()), std::memory_order_relaxed);
  s.level.store(static_cast<int>(parseLevel(param::debug())), std::memory_order_release);
}

Level loadLevel() {
  State& s = state();
  int lvl = s.level.load(std::memory_order_acquire);
  if (lvl >= 0) return static_cast<Level>(lvl);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.level.load(std::memory_order_relaxed) < 0) initLocked(s);
  return static_cast<Level>(s.level.load(std::memory_order_relaxed));
}

const char* levelName(Level lvl) {
  switch (lvl) {
    case Level::kVersion: return "VERSION";
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kTrace: return "TRACE";
    default: return "";
  }
}

}  // namespace

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  initLocked(s);
}

Level level() { return loadLevel(); }

bool enabled(Level lvl, uint32_t subsys) {
  Level current = loadLevel();
  if (static_cast<int>(lvl) > static_cast<int>(current)) return false;
  if (lvl == Level::kWarn || lvl == Level::kVersion) return true;
  return (state().subsys.load(std::memory_order_relaxed) & subsys) != 0;
}

int currentRank() { return tlsRank; }
void setCurrentRank(int rank) { tlsRank = rank; }

void write(Level lvl, uint32_t /*subsys*/, const char* file, int line, const char* fmt, ...) {
  State& s = state();
  va_list args;
  va_start(args, fmt);
  std::string message = strFormatV(fmt, args);
  va_end(args);
  std::string rank = tlsRank >= 0 ? std::to_string(tlsRank) : std::string("-");
  long tid = syscall(SYS_gettid);
  std::string where;
  if (lvl == Level::kWarn) {
    const char* base = std::strrchr(file, '/');
    where = strFormat("%s:%d ", base ? base + 1 : file, line);
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  std::fprintf(s.out, "%s:%d:%ld [%s] %sNCCL %s %s\n", s.host, static_cast<int>(getpid()), tid, rank.c_str(),
               where.c_str(), levelName(lvl), message.c_str());
  std::fflush(s.out);
}

}  // namespace weft::log
