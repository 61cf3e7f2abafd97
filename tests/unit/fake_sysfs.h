// A fake sysfs tree in a temporary directory: files, directories and
// relative symlinks laid out as the kernel does, for detection tests.
#pragma once

#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

namespace weft::graph::test {

class FakeSysfs {
 public:
  FakeSysfs() {
    char templ[] = "/tmp/weft-sysfs-XXXXXX";
    if (mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp");
    root_ = templ;
  }
  ~FakeSysfs() {
    nftw(
        root_.c_str(), [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  const std::string& root() const { return root_; }

  void dir(const std::string& rel) {
    std::string path = root_;
    size_t start = 0;
    while (start < rel.size()) {
      size_t slash = rel.find('/', start);
      if (slash == std::string::npos) slash = rel.size();
      path += "/" + rel.substr(start, slash - start);
      mkdir(path.c_str(), 0755);
      start = slash + 1;
    }
  }

  void file(const std::string& rel, const std::string& content) {
    const size_t slash = rel.rfind('/');
    if (slash != std::string::npos) dir(rel.substr(0, slash));
    std::ofstream(root_ + "/" + rel) << content << "\n";
  }

  // rel -> target, where target is relative to rel's directory (as in /sys).
  void link(const std::string& rel, const std::string& target) {
    const size_t slash = rel.rfind('/');
    if (slash != std::string::npos) dir(rel.substr(0, slash));
    if (symlink(target.c_str(), (root_ + "/" + rel).c_str()) != 0) throw std::runtime_error("symlink " + rel);
  }

  // A PCI device at devices/<path> ("pci0000:00/0000:00:01.0/0000:03:00.0"),
  // reachable as bus/pci/devices/<its bus id>, with attribute files.
  void pciDevice(const std::string& path, const std::map<std::string, std::string>& attrs = {}) {
    const std::string busId = path.substr(path.rfind('/') + 1);
    dir("devices/" + path);
    for (const auto& [k, v] : attrs) file("devices/" + path + "/" + k, v);
    link("bus/pci/devices/" + busId, "../../../devices/" + path);
  }

 private:
  std::string root_;
};

}  // namespace weft::graph::test
