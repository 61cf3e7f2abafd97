#include "common/process.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>

namespace weft {

bool processAlive(pid_t pid) {
  if (pid <= 0) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return true;  // no procfs view: trust kill()
  char state = '?';
  // Format: pid (comm) state ...; comm may contain spaces, so find the last ')'.
  char buf[512];
  size_t len = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[len] = '\0';
  for (size_t i = len; i > 0; --i) {
    if (buf[i - 1] == ')') {
      if (i + 1 < len) state = buf[i + 1];
      break;
    }
  }
  return state != 'Z' && state != 'X';
}

unsigned long long pidNamespaceId() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<unsigned long long>(st.st_ino);
}

}  // namespace weft
