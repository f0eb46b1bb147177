#pragma once
// The run's clock: seconds since the run started, and an accurate sleep that holds a thread until
// a deadline (sleeps, then spins the last stretch) so emulated ops end on time on a busy machine.
#include <chrono>

namespace ppsim::real {

class RunClock {
 public:
  using Clock = std::chrono::steady_clock;
  RunClock() : start_(Clock::now()) {}
  explicit RunClock(Clock::time_point start) : start_(start) {}
  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  Clock::time_point at(double seconds) const {
    return start_ +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  Clock::time_point start() const { return start_; }

 private:
  Clock::time_point start_;
};

// Holds the calling thread until `deadline`: sleeps until `spin` before it, then spins.
void sleep_until(RunClock::Clock::time_point deadline,
                 std::chrono::nanoseconds spin = std::chrono::microseconds(100));

// Asks the kernel to wake the calling thread on time (Linux's default timer slack lets a sleep
// run 50 us long); a no-op elsewhere. Each thread that keeps time calls it once.
void precise_timers();

}  // namespace ppsim::real
