// Progress line (cli/progress.hpp): redrawn in place with "\r\x1b[K", percent of the total, erased
// when done; nothing at all without a terminal (no sink) or before the delay.
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>

#include "progress.hpp"

using ppsim::cli::Progress;
using namespace std::chrono_literals;

TEST_CASE("progress.draws_done_total_place_erases", "[progress]") {
  // progress: draws done/total in place and erases itself
  std::ostringstream out;
  {
    Progress p("simulating", 4, &out, 0s, 0s);
    p.update(1, "gpipe-m8");
    CHECK(out.str() == "\r\x1b[Ksimulating: 1/4 (25%) gpipe-m8");
    p.update(4);
    CHECK(out.str().ends_with("\r\x1b[Ksimulating: 4/4 (100%)"));
    CHECK(p.drawn());
    p.phase("writing out.svg", 0);
    CHECK(out.str().ends_with("\r\x1b[Kwriting out.svg: "));
  }  // the destructor erases the line
  CHECK(out.str().ends_with("\r\x1b[K"));
}

TEST_CASE("progress.silent_without_sink_before_delay", "[progress]") {
  // progress: silent without a sink, before the delay, and cut to one line
  Progress none("simulating", 10, nullptr, 0s, 0s);
  none.update(5);
  CHECK_FALSE(none.drawn());

  std::ostringstream out;
  Progress later("simulating", 10, &out, 1h, 0s);
  later.update(5);
  later.finish();
  CHECK(out.str().empty());

  std::ostringstream narrow;
  Progress p(std::string(200, 'x'), 0, &narrow, 0s, 0s);
  p.update(7);
  CHECK(narrow.str().size() == 4 + 78);  // "\r\x1b[K" + 77 characters + '~'
  p.finish();
}

TEST_CASE("progress.redraws_most_once_per_interval", "[progress]") {
  // progress: redraws at most once per interval, also when the total is unknown
  for (const std::size_t total : {std::size_t{0}, std::size_t{1000}}) {
    std::ostringstream out;
    Progress p("simulating", total, &out, 0s, 1h);
    for (std::size_t i = 1; i < 1000; ++i) p.update(i);
    // The first update draws; the rest fall inside the hour.
    CHECK(out.str() == (total == 0 ? "\r\x1b[Ksimulating: 1" : "\r\x1b[Ksimulating: 1/1000 (0%)"));
    if (total > 0) {
      p.update(1000);  // the last step always shows
      CHECK(out.str().ends_with("1000/1000 (100%)"));
    }
    p.finish();
  }
}
