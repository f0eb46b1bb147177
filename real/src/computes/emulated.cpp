// `emulated`: a compute op holds its rank for its modelled duration times the time scale, touching
// its inputs and outputs; the wait sleeps, then spins the last stretch, so that ops end on time
// however many ranks share the cores.
#include <algorithm>
#include <chrono>
#include <thread>

#include "ppsim/real/compute.hpp"

namespace ppsim::real::computes {

namespace {

class EmulatedCompute final : public Compute {
 public:
  void begin(const ComputeContext& c) override {
    scale_ = c.time_scale;
    clock_ = &c.clock;
    cancel_ = &c.cancel;
  }

  void run(int, const schedules::Op&, double start, double duration, double,
           std::span<Buffer* const>, std::span<Buffer* const>) override {
    if (scale_ <= 0 || duration <= 0) return;
    const double end = start + duration * scale_;
    // Long ops wait in slices so that a stopped run is not held up by them.
    constexpr double kSlice = 0.05;
    for (double t = start + kSlice; t < end && !cancel_->load(std::memory_order_relaxed);
         t += kSlice) {
      if (end - t > 0.001) std::this_thread::sleep_until(clock_->at(t));
    }
    if (!cancel_->load(std::memory_order_relaxed)) sleep_until(clock_->at(end));
  }

 private:
  double scale_ = 0;
  const RunClock* clock_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace

void register_emulated(ComputeRegistry& registry) {
  registry.add({"emulated", "each op holds its rank for its modelled duration x --time-scale",
                [] { return std::make_unique<EmulatedCompute>(); }});
}

}  // namespace ppsim::real::computes
