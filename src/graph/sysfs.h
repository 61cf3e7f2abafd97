// Reading Linux sysfs under a configurable root, so detection can be tested
// on a fake tree (a temporary directory with the same files and relative
// symlinks as /sys), and PCI bus id spelling.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace weft::graph {

class Sysfs {
 public:
  explicit Sysfs(std::string root = "/sys");

  const std::string& root() const { return root_; }
  // The first line of root/relPath, without trailing whitespace; nullopt
  // when unreadable (sysfs attributes fail with EINVAL for "not applicable").
  std::optional<std::string> read(const std::string& relPath) const;
  // Entry names of a directory, sorted; empty when absent.
  std::vector<std::string> list(const std::string& relDir) const;
  // The canonical path of root/relPath with symlinks resolved, relative to
  // the root ("devices/pci0000:00/..."); empty when it does not resolve.
  std::string resolve(const std::string& relPath) const;

 private:
  std::string root_;
};

// "0000:1b:00.0": four-digit domain, lower-case hex, from the spellings the
// CUDA driver ("0000:1B:00.0"), NVML ("00000000:1B:00.0") and sysfs use.
// Empty when `id` is not a bus id.
std::string normalizeBusId(const std::string& id);

// The path components of a sysfs device path that are PCI bus ids, in path
// order (the root port first, the device last).
std::vector<std::string> busIdsInPath(const std::string& path);

}  // namespace weft::graph
