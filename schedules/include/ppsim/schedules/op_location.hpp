#pragma once
// Where an op of a program was written, for programs read from text: reports point at it.
#include <functional>
#include <optional>
#include <string>

namespace ppsim::schedules {

struct OpLocation {
  std::string where;  // for people: "schedule.ops line 3, column 9", "schedule.ops[2] column 9"
  int line = 0;       // 1-based; 0 where the text has no lines (one array element per rank)
  int column = 0;     // 1-based; 0 when not known
};

// The location of op `position` of `rank`, or nothing (a generated op, or one a lowering added).
using OpLocator = std::function<std::optional<OpLocation>(int rank, int position)>;

}  // namespace ppsim::schedules
