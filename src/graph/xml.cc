#include "graph/xml.h"

#include <cctype>
#include <fstream>
#include <sstream>

namespace weft::graph {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Result<std::unique_ptr<XmlNode>> document() {
    skipMisc();
    if (pos_ >= s_.size() || s_[pos_] != '<') return fail("expected the root element");
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<XmlNode> root, element());
    skipMisc();
    if (pos_ < s_.size()) return fail("content after the root element");
    return root;
  }

 private:
  int lineAt(size_t pos) {
    for (; counted_ < pos && counted_ < s_.size(); ++counted_) line_ += s_[counted_] == '\n';
    return line_;
  }

  Status fail(const std::string& what) {
    return errorStatus(ncclInvalidArgument, "line %d: %s", lineAt(pos_), what.c_str());
  }

  bool startsWith(const char* token) const {
    return s_.compare(pos_, std::char_traits<char>::length(token), token) == 0;
  }

  void skipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }

  // Whitespace, comments, processing instructions and doctype.
  void skipMisc() {
    for (;;) {
      skipSpace();
      const char* close = startsWith("<!--") ? "-->" : startsWith("<?") ? "?>" : startsWith("<!") ? ">" : nullptr;
      if (!close) return;
      const size_t end = s_.find(close, pos_);
      pos_ = end == std::string::npos ? s_.size() : end + std::char_traits<char>::length(close);
    }
  }

  std::string name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                                s_[pos_] == '-' || s_[pos_] == ':' || s_[pos_] == '.'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }

  static std::string unescape(const std::string& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != '&') {
        out += v[i];
        continue;
      }
      static const std::pair<const char*, char> kEntities[] = {
          {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
      bool matched = false;
      for (const auto& e : kEntities)
        if (v.compare(i, std::char_traits<char>::length(e.first), e.first) == 0) {
          out += e.second;
          i += std::char_traits<char>::length(e.first) - 1;
          matched = true;
          break;
        }
      if (!matched) out += '&';
    }
    return out;
  }

  Result<std::unique_ptr<XmlNode>> element(int depth = 1) {
    if (depth > kMaxXmlDepth) return fail("elements nested more than " + std::to_string(kMaxXmlDepth) + " deep");
    if (++elements_ > kMaxXmlElements) return fail("more than " + std::to_string(kMaxXmlElements) + " elements");
    auto node = std::make_unique<XmlNode>();
    node->line = lineAt(pos_);
    ++pos_;  // '<'
    node->name = name();
    if (node->name.empty()) return fail("expected an element name after '<'");
    for (;;) {
      skipSpace();
      if (pos_ >= s_.size()) return fail("unterminated <" + node->name + ">");
      if (startsWith("/>")) {
        pos_ += 2;
        return node;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      std::string key = name();
      if (key.empty()) return fail("expected an attribute name, '>' or '/>' in <" + node->name + ">");
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '=') return fail("expected = after " + key);
      ++pos_;
      skipSpace();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) return fail("expected a quoted value for " + key);
      const char quote = s_[pos_++];
      const size_t end = s_.find(quote, pos_);
      if (end == std::string::npos) return fail("unterminated value of " + key);
      node->attrs.emplace_back(key, unescape(s_.substr(pos_, end - pos_)));
      pos_ = end + 1;
    }
    for (;;) {  // content: children, text (ignored), comments, the end tag
      skipMisc();
      if (pos_ >= s_.size()) return fail("missing </" + node->name + ">");
      if (startsWith("</")) {
        pos_ += 2;
        const std::string closing = name();
        if (closing != node->name) return fail("</" + closing + "> closes <" + node->name + ">");
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '>') return fail("bad end tag </" + closing);
        ++pos_;
        return node;
      }
      if (s_[pos_] == '<') {
        WEFT_ASSIGN_OR_RETURN(std::unique_ptr<XmlNode> child, element(depth + 1));
        node->children.push_back(std::move(child));
      } else {
        while (pos_ < s_.size() && s_[pos_] != '<') ++pos_;
      }
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  size_t counted_ = 0;  // lineAt() has counted newlines up to here
  int line_ = 1;
  size_t elements_ = 0;
};

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

void write(const XmlNode& n, int depth, std::ostringstream& out) {
  out << std::string(static_cast<size_t>(depth) * 2, ' ') << '<' << n.name;
  for (const auto& [k, v] : n.attrs) out << ' ' << k << "=\"" << escape(v) << '"';
  if (n.children.empty()) {
    out << "/>\n";
    return;
  }
  out << ">\n";
  for (const auto& c : n.children) write(*c, depth + 1, out);
  out << std::string(static_cast<size_t>(depth) * 2, ' ') << "</" << n.name << ">\n";
}

}  // namespace

const std::string* XmlNode::attr(const std::string& key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

void XmlNode::set(const std::string& key, const std::string& value) {
  for (auto& [k, v] : attrs)
    if (k == key) return void(v = value);
  attrs.emplace_back(key, value);
}

XmlNode* XmlNode::add(const std::string& childName) {
  children.push_back(std::make_unique<XmlNode>());
  children.back()->name = childName;
  return children.back().get();
}

Result<std::unique_ptr<XmlNode>> parseXml(const std::string& text) { return Parser(text).document(); }

Result<std::unique_ptr<XmlNode>> readXmlFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errorStatus(ncclSystemError, "cannot open %s", path.c_str());
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > static_cast<std::streamoff>(kMaxXmlBytes))
    return errorStatus(ncclInvalidArgument, "%s: %lld bytes, more than the %zu a topology or graph file may hold",
                       path.c_str(), static_cast<long long>(size), kMaxXmlBytes);
  in.seekg(0, std::ios::beg);
  std::stringstream buf;
  buf << in.rdbuf();
  auto parsed = parseXml(buf.str());
  if (!parsed.ok()) return errorStatus(ncclInvalidArgument, "%s: %s", path.c_str(), parsed.status().message().c_str());
  return parsed;
}

std::string writeXml(const XmlNode& root) {
  std::ostringstream out;
  write(root, 0, out);
  return out.str();
}

Status writeXmlFile(const XmlNode& root, const std::string& path) {
  std::ofstream out(path);
  if (!out) return errorStatus(ncclSystemError, "cannot write %s", path.c_str());
  out << writeXml(root);
  return okStatus();
}

}  // namespace weft::graph
