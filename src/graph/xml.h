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

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<std::unique_ptr<XmlNode>> children;

  // The attribute's value, or nullptr.
  const std::string* attr(const std::string& key) const;
  void set(const std::string& key, const std::string& value);
  XmlNode* add(const std::string& childName);
};

// Parses a document with one root element; errors give the line.
Result<std::unique_ptr<XmlNode>> parseXml(const std::string& text);
Result<std::unique_ptr<XmlNode>> readXmlFile(const std::string& path);

// Serialises with two-space indentation and escaped attribute values.
std::string writeXml(const XmlNode& root);
Status writeXmlFile(const XmlNode& root, const std::string& path);

}  // namespace weft::graph
