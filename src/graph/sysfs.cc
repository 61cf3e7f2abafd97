#include "graph/sysfs.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>

namespace weft::graph {

Sysfs::Sysfs(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::optional<std::string> Sysfs::read(const std::string& relPath) const {
  std::ifstream in(root_ + "/" + relPath);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::vector<std::string> Sysfs::list(const std::string& relDir) const {
  std::vector<std::string> out;
  DIR* dir = opendir((root_ + "/" + relDir).c_str());
  if (dir == nullptr) return out;
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Sysfs::resolve(const std::string& relPath) const {
  char resolved[PATH_MAX];
  if (realpath((root_ + "/" + relPath).c_str(), resolved) == nullptr) return "";
  char rootResolved[PATH_MAX];
  if (realpath(root_.c_str(), rootResolved) == nullptr) return "";
  std::string full = resolved, base = rootResolved;
  if (base == "/") return full.substr(1);
  if (full.compare(0, base.size(), base) != 0) return "";
  return full.size() > base.size() ? full.substr(base.size() + 1) : "";
}

std::string normalizeBusId(const std::string& id) {
  // domain:bus:device.function, hex fields; nothing else may appear.
  const size_t c1 = id.find(':'), c2 = id.find(':', c1 + 1), dot = id.find('.', c2 + 1);
  if (c1 == std::string::npos || c2 == std::string::npos || dot == std::string::npos) return "";
  const std::string fields[] = {id.substr(0, c1), id.substr(c1 + 1, c2 - c1 - 1), id.substr(c2 + 1, dot - c2 - 1),
                                id.substr(dot + 1)};
  unsigned long values[4];
  for (int i = 0; i < 4; ++i) {
    if (fields[i].empty() || fields[i].size() > 8 ||
        fields[i].find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      return "";
    values[i] = std::stoul(fields[i], nullptr, 16);
  }
  if (values[0] > 0xffff || values[1] > 0xff || values[2] > 0x1f || values[3] > 7) return "";
  char out[16];
  std::snprintf(out, sizeof(out), "%04lx:%02lx:%02lx.%lx", values[0], values[1], values[2], values[3]);
  return out;
}

std::vector<std::string> busIdsInPath(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    const std::string part = path.substr(start, slash - start);
    // Only the full spelling counts: "pci0000:00" (a root complex) and
    // "virtio2" are not devices on a bus.
    const std::string id = normalizeBusId(part);
    if (part.size() == 12 && !id.empty()) out.push_back(id);
    start = slash + 1;
  }
  return out;
}

}  // namespace weft::graph
