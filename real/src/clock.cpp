#include "ppsim/real/clock.hpp"

#include <thread>

namespace ppsim::real {

void sleep_until(RunClock::Clock::time_point deadline, std::chrono::nanoseconds spin) {
  // The kernel wakes a sleeper tens of microseconds late; the last stretch is spun so that an op
  // of a few milliseconds ends within a few microseconds of its deadline.
  const auto wake = deadline - spin;
  if (RunClock::Clock::now() < wake) std::this_thread::sleep_until(wake);
  while (RunClock::Clock::now() < deadline) std::this_thread::yield();
}

}  // namespace ppsim::real
