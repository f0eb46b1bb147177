#pragma once
// Text put into XML or HTML markup (element text and quoted attribute values): the five
// characters with a meaning there become entities, so a config named `<&">` cannot change the
// document around it. &apos; is XML's and HTML5's. Other control characters are dropped.
#include <string>
#include <string_view>

namespace ppsim::viz::detail {

inline std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids control characters other than tab and newline, even as references.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

}  // namespace ppsim::viz::detail
