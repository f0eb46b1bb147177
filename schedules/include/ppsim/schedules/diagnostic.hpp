#pragma once
// A problem found in a Program, by validation or by the simulator.
#include <string>

namespace ppsim::schedules {

struct Diagnostic {
  std::string kind;     // stable snake_case name, e.g. "missing_compute", "never_waited"
  int rank = -1;        // -1: not tied to one rank
  int position = -1;    // index in the rank's op list, -1: not tied to one op
  std::string op;       // op text at that position
  std::string message;  // full sentence for humans
  bool fatal = false;   // the simulator cannot run the program
};

}  // namespace ppsim::schedules
