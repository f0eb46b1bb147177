#pragma once
// Lower bounds on the makespan of any schedule of an instance, whatever its memory: a rank cannot
// start before the first microbatch reaches it and must then do all its work; the last
// microbatch's forward and backward chain cannot start before stage 0 ran all forwards before it.
#include "ppsim/search/instance.hpp"

namespace ppsim::search {

double lower_bound(const Instance& in);

}  // namespace ppsim::search
