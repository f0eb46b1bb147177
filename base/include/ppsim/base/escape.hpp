#pragma once
// Text from the input put into markup (SVG, HTML, JUnit XML): one escaper for every writer, so that
// a config named `<&">`, a control character or a byte that is not UTF-8 can neither change the
// document around it nor make it ill-formed.
#include <string>
#include <string_view>

namespace ppsim::base {

// `text` escaped for an XML 1.0 attribute value (or, attribute false, character data): markup
// characters as entities; carriage return, and in attributes tab and newline, as character
// references (a parser would normalize them away); other control characters and invalid UTF-8 as
// U+FFFD (XML cannot carry them at all).
std::string xml_escape(std::string_view text, bool attribute = true);
// Character data keeps tab and newline as they are (attribute false).

}  // namespace ppsim::base
