// A process's part of a run under mpirun travels as bytes (real/src/process_report.hpp): what
// process 0 unpacks is what the process packed, and bytes it did not pack are refused.
#include <catch2/catch.hpp>
#include <cstring>

#include "process_report.hpp"

using ppsim::real::detail::pack;
using ppsim::real::detail::ProcessReport;
using ppsim::real::detail::unpack;
using ppsim::record::SpanKind;

namespace {

ProcessReport sample() {
  ProcessReport r;
  r.rank = 3;
  r.timeline = {0.5, 41.25, false, 7, 1 << 30};
  r.spans = {{3, 0, SpanKind::compute, 0.5, 1.5},
             {3, 1, SpanKind::post, 1.5, 1.5},
             {3, 2, SpanKind::blocked, 1.5, 41.25}};
  r.transfers = {{2, 4, 3, 1, 1.25, 1.75, 16777216}};
  r.counters = {{3, 0.5, 268435456, 1}, {3, 1.5, 0, 0}};
  r.diagnostics = {
      {"message_order_mismatch", 3, 1, "3RECV_F0", "rank 3 op 1: receives ...", false}};
  r.edges = {{3, 2, "3SEND_B0", 2, ""}, {3, 2, "WAIT(1;2)", 1, "1SEND_F2 (é, \0 bytes)"}};
  r.real_peak = 123456789;
  r.failure = "rank 3 op 2 (3SEND_B0): boom";
  return r;
}

}  // namespace

TEST_CASE("process_report.process_report_unpacks_what_was", "[real][mpi]") {
  // a process report unpacks to what was packed
  const ProcessReport r = sample();
  const std::string bytes = pack(r);
  const ProcessReport u = unpack(bytes);
  CHECK(pack(u) == bytes);
  CHECK(u.rank == 3);
  CHECK(u.timeline.end == 41.25);
  CHECK_FALSE(u.timeline.finished);
  CHECK(u.timeline.stuck_pos == 7);
  REQUIRE(u.spans.size() == 3);
  CHECK(u.spans[2].kind == SpanKind::blocked);
  CHECK(u.spans[2].end == 41.25);
  REQUIRE(u.transfers.size() == 1);
  CHECK(u.transfers[0].src_rank == 2);
  CHECK(u.transfers[0].bytes == 16777216);
  REQUIRE(u.counters.size() == 2);
  CHECK(u.counters[0].memory_bytes == 268435456);
  REQUIRE(u.diagnostics.size() == 1);
  CHECK(u.diagnostics[0].kind == "message_order_mismatch");
  CHECK(u.diagnostics[0].message == r.diagnostics[0].message);
  REQUIRE(u.edges.size() == 2);
  CHECK(u.edges[1].waiting_for == r.edges[1].waiting_for);
  CHECK(u.edges[1].peer == 1);
  CHECK(u.real_peak == 123456789);
  CHECK(u.failure == r.failure);
  // An empty report (a rank without ops) too.
  CHECK(pack(unpack(pack(ProcessReport{}))) == pack(ProcessReport{}));
}

TEST_CASE("process_report.bytes_whole_process_report_refused", "[real][mpi]") {
  // bytes that are not a whole process report are refused
  const std::string bytes = pack(sample());
  for (std::size_t n = 0; n < bytes.size(); ++n)
    CHECK_THROWS_WITH(unpack(std::string_view(bytes).substr(0, n)),
                      "a process report is truncated");
  CHECK_THROWS_WITH(unpack(bytes + "x"), "a process report has trailing bytes");
  // A count far beyond the bytes that follow is refused before anything is allocated.
  std::string huge = bytes;
  const std::uint64_t n = ~std::uint64_t{0} / 2;
  std::memcpy(huge.data() + sizeof(int) + sizeof(ppsim::record::RankTimeline), &n, sizeof n);
  CHECK_THROWS_WITH(unpack(huge), "a process report is truncated");
}
