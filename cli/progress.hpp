#pragma once
// A one-line progress indicator for long work (sweeps, big simulations and traces), redrawn in
// place on stderr. Silent unless stderr is a terminal, so logs, pipes and CI output stay clean;
// silent too for work that ends before `delay` has passed, so short runs do not flicker.
#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

namespace ppsim::cli {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  // Draws on stderr when it is a terminal.
  Progress(std::string what, std::size_t total);
  // Draws on `out` (nullptr: nowhere) after `delay`, at most once per `interval`.
  Progress(std::string what, std::size_t total, std::ostream* out, Clock::duration delay,
           Clock::duration interval);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of `total` units finished; `label` says what is being done now.
  void update(std::size_t done, std::string_view label = {});
  // A new phase of the same work (e.g. "writing trace").
  void phase(std::string what, std::size_t total);
  // Erases the line (if one was drawn). Idempotent.
  void finish();
  bool drawn() const { return drawn_; }

 private:
  void draw(std::string_view label);

  std::string what_;
  std::size_t total_ = 0, done_ = 0;
  std::ostream* out_ = nullptr;
  Clock::time_point start_, last_;
  Clock::duration delay_{}, interval_{};
  bool drawn_ = false;
};

}  // namespace ppsim::cli
