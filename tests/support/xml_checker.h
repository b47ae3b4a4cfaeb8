// tests/support/xml_checker.h: a strict XML 1.0 well-formedness checker for the figures and
// the report (test-only; no shared code with src/).
#pragma once

#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::testing {

// ---------------------------------------------------------------------------------------------
// A strict XML 1.0 well-formedness checker for the subset SVG files use: elements, attributes,
// text, comments, an optional <?xml ...?> declaration. Rules enforced: names are well formed;
// every attribute value is quoted and contains no '<'; no attribute appears twice on an element;
// '&' starts one of the five predefined entities or a numeric character reference; tags nest
// and balance; exactly one root element with nothing but whitespace and comments around it.
// Builds a small tree so tests can look for elements and texts.

struct Node {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // character data directly inside (entities decoded)
  std::vector<std::unique_ptr<Node>> children;
};

class XmlChecker {
 public:
  explicit XmlChecker(std::string_view s) : s_(s) {}

  // The root, or nullptr with error() set.
  std::unique_ptr<Node> parse() {
    try {
      skip_misc(true);
      if (pos_ >= s_.size() || s_[pos_] != '<') fail("expected the root element");
      auto root = element();
      skip_misc(false);
      if (pos_ != s_.size()) fail("content after the root element");
      return root;
    } catch (const std::string& e) {
      error_ = e;
      return nullptr;
    }
  }
  const std::string& error() const { return error_; }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw what + " at offset " + std::to_string(pos_);
  }
  bool starts(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void comment() {
    pos_ += 4;
    const auto end = s_.find("-->", pos_);
    if (end == std::string_view::npos) fail("unterminated comment");
    if (s_.substr(pos_, end - pos_).find("--") != std::string_view::npos)
      fail("'--' inside a comment");
    pos_ = end + 3;
  }
  // Whitespace, comments and (before the root only) the XML declaration.
  void skip_misc(bool prolog) {
    for (;;) {
      skip_ws();
      if (starts("<!--")) {
        comment();
      } else if (prolog && pos_ == 0 && starts("<?xml")) {
        const auto end = s_.find("?>", pos_);
        if (end == std::string_view::npos) fail("unterminated XML declaration");
        pos_ = end + 2;
      } else if (pos_ < s_.size() && s_[pos_] != '<') {
        fail("text outside the root element");
      } else {
        return;
      }
    }
  }
  static bool name_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  }
  static bool name_char(char c) {
    return name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
  }
  std::string name() {
    if (pos_ >= s_.size() || !name_start(s_[pos_])) fail("expected a name");
    const std::size_t start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }
  // Character data up to `stop`, with references checked and decoded.
  std::string chars(char stop) {
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != stop) {
      const char c = s_[pos_];
      if (c == '<') fail("'<' in character data or attribute value");
      if (c == '&') {
        const auto end = s_.find(';', pos_);
        if (end == std::string_view::npos || end - pos_ > 12) fail("unterminated reference");
        const std::string_view ref = s_.substr(pos_ + 1, end - pos_ - 1);
        static const std::map<std::string_view, char> kEntities = {
            {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
        if (auto it = kEntities.find(ref); it != kEntities.end()) {
          out += it->second;
        } else if (ref.size() >= 2 && ref[0] == '#') {
          const bool hex = ref[1] == 'x';
          const std::string_view digits = ref.substr(hex ? 2 : 1);
          if (digits.empty()) fail("empty character reference");
          for (char d : digits) {
            if (!(hex ? std::isxdigit(static_cast<unsigned char>(d))
                      : std::isdigit(static_cast<unsigned char>(d)))) {
              fail("bad character reference &" + std::string(ref) + ";");
            }
          }
          out += '?';
        } else {
          fail("undefined entity &" + std::string(ref) + ";");
        }
        pos_ = end + 1;
      } else {
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
          fail("control character");
        out += c;
        ++pos_;
      }
    }
    return out;
  }
  std::unique_ptr<Node> element() {
    if (++depth_ > 200) fail("nesting too deep");
    ++pos_;  // '<'
    auto node = std::make_unique<Node>();
    node->name = name();
    for (;;) {
      const std::size_t before = pos_;
      skip_ws();
      if (pos_ >= s_.size()) fail("unterminated start tag <" + node->name);
      if (starts("/>")) {
        pos_ += 2;
        --depth_;
        return node;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      if (pos_ == before) fail("expected whitespace before an attribute");
      const std::string attr = name();
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '=') fail("attribute " + attr + " has no '='");
      ++pos_;
      skip_ws();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\''))
        fail("attribute " + attr + " is not quoted");
      const char quote = s_[pos_++];
      std::string value = chars(quote);
      if (pos_ >= s_.size()) fail("unterminated attribute value");
      ++pos_;
      if (!node->attrs.emplace(attr, std::move(value)).second) fail("duplicate attribute " + attr);
    }
    // Content.
    for (;;) {
      if (pos_ >= s_.size()) fail("unclosed element <" + node->name + ">");
      if (starts("</")) {
        pos_ += 2;
        const std::string end = name();
        if (end != node->name) fail("</" + end + "> closes <" + node->name + ">");
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != '>') fail("bad end tag");
        ++pos_;
        --depth_;
        return node;
      }
      if (starts("<!--")) {
        comment();
      } else if (starts("<![CDATA[")) {
        const auto end = s_.find("]]>", pos_);
        if (end == std::string_view::npos) fail("unterminated CDATA");
        node->text += s_.substr(pos_ + 9, end - pos_ - 9);
        pos_ = end + 3;
      } else if (starts("<")) {
        node->children.push_back(element());
      } else {
        node->text += chars('<');
      }
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

inline void collect(const Node& n, std::string_view name, std::vector<const Node*>& out) {
  if (n.name == name) out.push_back(&n);
  for (const auto& c : n.children) collect(*c, name, out);
}

inline std::vector<const Node*> all(const Node& root, std::string_view name) {
  std::vector<const Node*> out;
  collect(root, name, out);
  return out;
}

}  // namespace posenc::testing
