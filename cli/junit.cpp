#include "junit.hpp"

#include "ppsim/base/escape.hpp"

#include <fmt/format.h>

namespace ppsim::cli {

namespace {

const char* result_element(JunitCase::Result r) {
  return r == JunitCase::Result::failure ? "failure" : "error";
}

}  // namespace

void write_junit(std::ostream& out, const std::string& suite, const std::vector<JunitCase>& cases) {
  std::size_t failures = 0, errors = 0;
  for (const auto& c : cases) {
    failures += c.result == JunitCase::Result::failure;
    errors += c.result == JunitCase::Result::error;
  }
  const std::string counts =
      fmt::format("tests=\"{}\" failures=\"{}\" errors=\"{}\"", cases.size(), failures, errors);
  const std::string name = base::xml_escape(suite);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuites name=\"{}\" {}>\n", name, counts);
  out << fmt::format("  <testsuite name=\"{}\" {} skipped=\"0\">\n", name, counts);
  for (const auto& c : cases) {
    out << fmt::format("    <testcase classname=\"{}\" name=\"{}\"", base::xml_escape(c.classname),
                       base::xml_escape(c.name));
    if (c.result == JunitCase::Result::passed) {
      out << "/>\n";
      continue;
    }
    const char* element = result_element(c.result);
    out << fmt::format(">\n      <{} type=\"{}\" message=\"{}\">{}</{}>\n    </testcase>\n",
                       element, base::xml_escape(c.type), base::xml_escape(c.message),
                       base::xml_escape(c.text, false), element);
  }
  out << "  </testsuite>\n</testsuites>\n";
}

}  // namespace ppsim::cli
