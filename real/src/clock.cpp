#include "ppsim/real/clock.hpp"

#include <thread>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace ppsim::real {

void sleep_until(RunClock::Clock::time_point deadline, std::chrono::nanoseconds spin) {
  // The kernel wakes a sleeper tens of microseconds late; the last stretch is spun so that an op
  // of a few milliseconds ends within a few microseconds of its deadline.
  const auto wake = deadline - spin;
  if (RunClock::Clock::now() < wake) std::this_thread::sleep_until(wake);
  while (RunClock::Clock::now() < deadline) std::this_thread::yield();
}

}  // namespace ppsim::real

namespace ppsim::real {

void precise_timers() {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // advice: failure only costs precision
#endif
}

}  // namespace ppsim::real
