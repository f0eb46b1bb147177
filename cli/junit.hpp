#pragma once
// JUnit XML, the report format CI systems read (GitLab's artifacts:reports:junit, GitHub summary
// actions, Jenkins): one <testsuite>, one <testcase> per checked schedule. No timestamps or
// durations, so that the same inputs give the same bytes.
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ppsim::cli {

struct JunitCase {
  enum class Result { passed, failure, error };
  std::string classname;  // the file
  std::string name;       // the schedule's name
  Result result = Result::passed;
  std::string type;     // failure/error type, e.g. "deadlock", "bad_input"
  std::string message;  // one line: why
  std::string text;     // the full explanation, the element's body
};

// A whole document: <testsuites> around one <testsuite name="suite">, counts on both.
void write_junit(std::ostream& out, const std::string& suite, const std::vector<JunitCase>& cases);

}  // namespace ppsim::cli
