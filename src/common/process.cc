#include "common/process.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace weft {

namespace {

// The state letter of /proc/<pid>/stat ('R', 'S', 'T', 'Z', ...), or '?'.
char processState(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return '?';
  char buf[512];
  size_t len = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[len] = '\0';
  // Format: pid (comm) state ...; comm may contain spaces, so find the last ')'.
  for (size_t i = len; i > 0; --i)
    if (buf[i - 1] == ')') return i + 1 < len ? buf[i + 1] : '?';
  return '?';
}

std::atomic<pid_t> gPid{0};

void forgetPidInChild() { gPid.store(0, std::memory_order_relaxed); }

}  // namespace

pid_t thisProcessId() {
  pid_t pid = gPid.load(std::memory_order_relaxed);
  if (pid != 0) return pid;
  static const bool kRegistered = pthread_atfork(nullptr, nullptr, forgetPidInChild) == 0;
  pid = getpid();
  // Without the handler a forked child could read its parent's id: keep asking.
  if (kRegistered) gPid.store(pid, std::memory_order_relaxed);
  return pid;
}

bool processAlive(pid_t pid) {
  if (pid <= 0) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  const char state = processState(pid);  // '?': no procfs view, trust kill()
  return state != 'Z' && state != 'X';
}

bool processStopped(pid_t pid) {
  if (pid <= 0) return false;
  const char state = processState(pid);
  return state == 'T' || state == 't';
}

unsigned long long pidNamespaceId() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<unsigned long long>(st.st_ino);
}

}  // namespace weft
