// A small XML reader and writer for NCCL's topology and graph files:
// elements, attributes, self-closing tags, comments and the <?xml?> header.
// Text content is not used by those formats and is skipped.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace weft::graph {

// Limits that keep a hostile or corrupt file from exhausting the stack or
// memory; real topology files stay far below them (a 72-GPU NVL72 tray dump
// nests 8 deep and holds a few thousand elements).
constexpr int kMaxXmlDepth = 64;
constexpr size_t kMaxXmlElements = 1 << 20;
constexpr size_t kMaxXmlBytes = 64u << 20;

struct XmlNode {
  std::string name;
  int line = 0;  // where the element starts in its file (0: built in memory)
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<std::unique_ptr<XmlNode>> children;

  // The attribute's value, or nullptr.
  const std::string* attr(const std::string& key) const;
  void set(const std::string& key, const std::string& value);
  XmlNode* add(const std::string& childName);
};

// Parses a document with one root element; errors give the line and what
// was expected there.
Result<std::unique_ptr<XmlNode>> parseXml(const std::string& text);
Result<std::unique_ptr<XmlNode>> readXmlFile(const std::string& path);

// Serialises with two-space indentation and escaped attribute values.
std::string writeXml(const XmlNode& root);
Status writeXmlFile(const XmlNode& root, const std::string& path);

}  // namespace weft::graph
