#include "progress.hpp"

#include <fmt/format.h>

#include <iostream>

#include "terminal.hpp"

namespace ppsim::cli {

Progress::Progress(std::string what, std::size_t total)
    : Progress(std::move(what), total, is_terminal(2) ? &std::cerr : nullptr,
               std::chrono::milliseconds(500), std::chrono::milliseconds(100)) {}

Progress::Progress(std::string what, std::size_t total, std::ostream* out, Clock::duration delay,
                   Clock::duration interval)
    : what_(std::move(what)),
      total_(total),
      out_(out),
      start_(Clock::now()),
      last_(start_),
      delay_(delay),
      interval_(interval) {}

void Progress::update(std::size_t done, std::string_view label) {
  done_ = done;
  if (!out_) return;
  const auto now = Clock::now();
  if (now - start_ < delay_) return;
  // Throttled, except for the last step of known work.
  if (drawn_ && now - last_ < interval_ && (total_ == 0 || done_ < total_)) return;
  last_ = now;
  draw(label);
}

void Progress::phase(std::string what, std::size_t total) {
  what_ = std::move(what);
  total_ = total;
  done_ = 0;
  update(0);
}

void Progress::draw(std::string_view label) {
  std::string line = fmt::format("{}: ", what_);
  if (total_ > 0)
    line += fmt::format("{}/{} ({:.0f}%)", done_, total_,
                        100.0 * static_cast<double>(done_) / static_cast<double>(total_));
  else if (done_ > 0)
    line += fmt::format("{}", done_);
  if (!label.empty()) line += fmt::format(" {}", label);
  if (line.size() > 78) {  // one line, even in a narrow terminal; cut between UTF-8 characters
    std::size_t n = 77;
    while (n > 0 && (static_cast<unsigned char>(line[n]) & 0xC0) == 0x80) --n;
    line = line.substr(0, n) + "~";
  }
  *out_ << "\r\x1b[K" << line << std::flush;
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_ && out_) *out_ << "\r\x1b[K" << std::flush;
  drawn_ = false;
  out_ = nullptr;
}

}  // namespace ppsim::cli
