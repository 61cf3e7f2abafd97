#include "common/hash.h"

#include <sys/random.h>
#include <unistd.h>

#include <fstream>

#include "common/clock.h"
#include "common/params.h"

namespace weft {

uint64_t randomU64() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) == static_cast<ssize_t>(sizeof(value))) return value;
  uint64_t mix =
      static_cast<uint64_t>(nowNs()) ^ (static_cast<uint64_t>(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&value);
  return hashBytes(&mix, sizeof(mix));
}

uint64_t hostHash() {
  std::string id = param::hostId();
  if (id.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    id = host;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string bootId;
    if (boot >> bootId) id += ":" + bootId;
  }
  return hashString(id);
}

uint64_t machineHash() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(boot >> id)) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    id = host;
  }
  return hashString("machine:" + id);
}

uint64_t processHash() {
  // The pid alone repeats across pid namespaces (containers); the namespace
  // inode tells them apart.
  std::string id = std::to_string(getpid());
  char link[256] = {0};
  if (readlink("/proc/self/ns/pid", link, sizeof(link) - 1) > 0) id += link;
  return hashString(id) ^ hostHash();
}

}  // namespace weft
