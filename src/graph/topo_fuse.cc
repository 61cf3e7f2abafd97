#include "graph/topo_fuse.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

namespace weft::graph {
namespace {

std::string attrOr(const XmlNode& n, const char* key, const char* fallback = "") {
  const std::string* v = n.attr(key);
  return v ? *v : fallback;
}

// What makes two elements under one parent the same thing.
std::string identity(const XmlNode& n) {
  if (n.name == "cpu") return "cpu:" + attrOr(n, "numaid");
  if (n.name == "pci") return "pci:" + attrOr(n, "busid");
  if (n.name == "net") return "net:" + attrOr(n, "name") + ":" + attrOr(n, "port", "1");
  if (n.name == "nvlink") return "nvlink:" + attrOr(n, "target");
  if (n.name == "nic") {
    // A virtual NIC hangs from a CPU and is known by its ports' names.
    std::string key = "nic";
    for (const auto& c : n.children) key += ":" + attrOr(*c, "name");
    return key;
  }
  if (n.name == "gpu") return "gpu";
  std::string key = n.name;
  for (const auto& [k, v] : n.attrs) key += " " + k + "=" + v;
  return key;
}

class Fuser {
 public:
  explicit Fuser(XmlNode* root) { index(*root); }

  void merge(XmlNode* dst, const XmlNode& src) {
    mergeAttrs(dst, src);
    for (const auto& child : src.children) {
      XmlNode* same = find(dst, *child);
      if (same) {
        merge(same, *child);
      } else {
        // Added element by element, so a device this subtree repeats from
        // elsewhere in the fused tree merges there instead of appearing twice.
        auto fresh = std::make_unique<XmlNode>();
        fresh->name = child->name;
        dst->children.push_back(std::move(fresh));
        XmlNode* added = dst->children.back().get();
        if (child->name == "pci") pcis_.emplace(attrOr(*child, "busid"), added);
        merge(added, *child);
      }
    }
  }

 private:
  static void mergeAttrs(XmlNode* dst, const XmlNode& src) {
    for (const auto& [k, v] : src.attrs) {
      const std::string* mine = dst->attr(k);
      if (mine == nullptr) dst->set(k, v);
      // A GPU seen by the rank that drives it carries that rank.
      else if (dst->name == "gpu" && k == "rank" && std::atoi(mine->c_str()) < 0)
        dst->set(k, v);
    }
  }

  XmlNode* find(XmlNode* dst, const XmlNode& child) {
    if (child.name == "pci") {
      auto it = pcis_.find(attrOr(child, "busid"));
      return it == pcis_.end() ? nullptr : it->second;
    }
    if (child.name == "nic" && dst->name == "pci") {  // a PCI device has one NIC function
      for (const auto& c : dst->children)
        if (c->name == "nic") return c.get();
      return nullptr;
    }
    const std::string key = identity(child);
    for (const auto& c : dst->children)
      if (c->name == child.name && identity(*c) == key) return c.get();
    return nullptr;
  }

  void index(XmlNode& n) {
    if (n.name == "pci") pcis_.emplace(attrOr(n, "busid"), &n);
    for (const auto& c : n.children) index(*c);
  }

  std::map<std::string, XmlNode*> pcis_;
};

void forEachGpu(XmlNode& n, const std::function<void(XmlNode& pci, XmlNode& gpu)>& fn) {
  for (const auto& c : n.children) {
    if (n.name == "pci" && c->name == "gpu") fn(n, *c);
    forEachGpu(*c, fn);
  }
}

void renumberIfDevsCollide(XmlNode* root) {
  std::vector<std::pair<std::string, XmlNode*>> gpus;  // bus id, <gpu>
  std::set<std::string> devs;
  bool collide = false;
  forEachGpu(*root, [&](XmlNode& pci, XmlNode& gpu) {
    gpus.emplace_back(attrOr(pci, "busid"), &gpu);
    collide = !devs.insert(attrOr(gpu, "dev", "-1")).second || collide;
  });
  if (!collide) return;
  std::sort(gpus.begin(), gpus.end());
  for (size_t i = 0; i < gpus.size(); ++i) gpus[i].second->set("dev", std::to_string(i));
}

}  // namespace

std::unique_ptr<XmlNode> cloneXml(const XmlNode& node) {
  auto out = std::make_unique<XmlNode>();
  out->name = node.name;
  out->attrs = node.attrs;
  for (const auto& c : node.children) out->children.push_back(cloneXml(*c));
  return out;
}

std::unique_ptr<XmlNode> fuseTopologyViews(const std::vector<const XmlNode*>& views) {
  auto root = std::make_unique<XmlNode>();
  root->name = "system";
  Fuser fuser(root.get());
  for (const XmlNode* v : views)
    if (v) fuser.merge(root.get(), *v);
  if (!root->attr("version")) root->set("version", "1");
  renumberIfDevsCollide(root.get());
  return root;
}

namespace {

// Post-order: a <pci> bridge or <cpu> that holds nothing after the merge.
void dropEmpty(XmlNode* n, const std::set<const XmlNode*>& fromFile) {
  auto& kids = n->children;
  for (auto& c : kids) dropEmpty(c.get(), fromFile);
  kids.erase(std::remove_if(kids.begin(), kids.end(),
                            [&](const std::unique_ptr<XmlNode>& c) {
                              const bool container =
                                  c->name == "cpu" || (c->name == "pci" && attrOr(*c, "class") == "0x060400");
                              return container && c->children.empty() && !fromFile.count(c.get());
                            }),
             kids.end());
}

}  // namespace

std::unique_ptr<XmlNode> mergeTopologyFile(const XmlNode& file, const XmlNode* detected) {
  if (detected == nullptr) return fuseTopologyViews({&file});
  std::unique_ptr<XmlNode> merged = fuseTopologyViews({&file, detected});
  // The file's elements come first under every parent, in the file's
  // order: recognise them by position, to keep even the empty ones it has.
  std::set<const XmlNode*> fromFile;
  std::function<void(const XmlNode&, const XmlNode&)> mark = [&](const XmlNode& f, const XmlNode& m) {
    fromFile.insert(&m);
    for (size_t i = 0; i < f.children.size() && i < m.children.size(); ++i) mark(*f.children[i], *m.children[i]);
  };
  mark(file, *merged);
  dropEmpty(merged.get(), fromFile);
  return merged;
}

bool hasGpus(const XmlNode& system) {
  if (system.name == "gpu") return true;
  for (const auto& c : system.children)
    if (hasGpus(*c)) return true;
  return false;
}

std::vector<std::string> gpuBusIds(const XmlNode& system) {
  std::vector<std::string> out;
  forEachGpu(const_cast<XmlNode&>(system), [&](XmlNode& pci, XmlNode&) { out.push_back(attrOr(pci, "busid")); });
  return out;
}

void keepGpus(XmlNode* system, const std::set<std::string>& keep) {
  std::function<void(XmlNode&)> prune = [&](XmlNode& n) {
    auto& kids = n.children;
    kids.erase(std::remove_if(kids.begin(), kids.end(),
                              [&](const std::unique_ptr<XmlNode>& c) {
                                if (c->name != "pci") return false;
                                const bool isGpu = std::any_of(c->children.begin(), c->children.end(),
                                                               [](const auto& g) { return g->name == "gpu"; });
                                return isGpu && !keep.count(attrOr(*c, "busid"));
                              }),
               kids.end());
    for (const auto& c : kids) prune(*c);
  };
  prune(*system);
}

void setGpuRanks(XmlNode* system, const std::map<std::string, int>& rankOfBusId) {
  forEachGpu(*system, [&](XmlNode& pci, XmlNode& gpu) {
    auto it = rankOfBusId.find(attrOr(pci, "busid"));
    gpu.set("rank", std::to_string(it == rankOfBusId.end() ? -1 : it->second));
  });
}

}  // namespace weft::graph
