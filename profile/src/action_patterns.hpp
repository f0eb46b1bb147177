#pragma once
// Matching range names against the action patterns (internal to profile/): RE2, whose time is
// linear in the name whatever the pattern (a map file is input, and a backtracking engine takes
// exponential time or overflows its stack on some patterns and names).
#include <string_view>
#include <vector>

#include "ppsim/profile/kineto.hpp"

namespace ppsim::profile::detail {

// Whether the whole name matches; names over kMaxActionNameBytes never do.
bool matches(const ActionPattern& p, std::string_view name);
// The same, filling groups[0..mark count] (0: the whole name) when it does.
bool match_groups(const ActionPattern& p, std::string_view name,
                  std::vector<std::string_view>& groups);

}  // namespace ppsim::profile::detail
