// The byte sinks of streamed traces (viz/src/trace_encoder.hpp): the background sink hands the
// same bytes, in the same order, to its inner sink on a thread of its own, passes on the inner
// sink's failure, and can be dropped unfinished; gzip through it gives the same file. Each gzip
// encoder (zlib's, and ISA-L's where the build has it) writes one member that inflates to what it
// was given, in equal bytes for equal pieces.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gunzip.hpp"
#include "trace_encoder.hpp"

using ppsim::test::gunzip;
using ppsim::viz::detail::ByteSink;
using ppsim::viz::detail::make_background_sink;
using ppsim::viz::detail::make_gzip_sink;
using ppsim::viz::detail::make_isal_gzip_sink;
using ppsim::viz::detail::make_zlib_gzip_sink;

namespace {

// Keeps what it is given, and on which thread; throws from the `fail_at`-th write on (1-based).
struct Recorder : ByteSink {
  std::string* bytes;
  std::atomic<int>* finished;
  std::thread::id* writer;
  int fail_at = 0;
  int writes = 0;
  Recorder(std::string* b, std::atomic<int>* f, std::thread::id* w)
      : bytes(b), finished(f), writer(w) {}
  void write(const char* data, std::size_t size) override {
    if (fail_at > 0 && ++writes >= fail_at) throw std::runtime_error("disk on fire");
    *writer = std::this_thread::get_id();
    bytes->append(data, size);
  }
  void finish() override { ++*finished; }
};

// Random bytes in writes of random sizes, from empty to a few blocks.
std::string feed(ByteSink& sink, std::size_t total, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string all;
  while (all.size() < total) {
    std::size_t n = std::uniform_int_distribution<std::size_t>(0, 3 << 20)(rng);
    if (rng() % 4 == 0) n %= 300;  // many small writes too, as the encoders' last flush makes
    std::string chunk(n, '\0');
    for (auto& c : chunk) c = static_cast<char>(rng());
    sink.write(chunk.data(), chunk.size());
    all += chunk;
  }
  return all;
}

}  // namespace

TEST_CASE("trace_sinks.background_sink_passes_byte_order", "[threads]") {
  // A background sink passes every byte on in order, from another thread
  for (unsigned seed : {1u, 2u, 3u}) {
    std::string got;
    std::atomic<int> finished{0};
    std::thread::id writer;
    auto sink = make_background_sink(std::make_unique<Recorder>(&got, &finished, &writer));
    const std::string sent = feed(*sink, std::size_t{12} << 20, seed);
    sink->finish();
    CHECK(finished == 1);
    CHECK(got.size() == sent.size());
    CHECK(got == sent);
    CHECK(writer != std::this_thread::get_id());
  }
  // Nothing written: finish still reaches the inner sink.
  std::string got;
  std::atomic<int> finished{0};
  std::thread::id writer;
  auto sink = make_background_sink(std::make_unique<Recorder>(&got, &finished, &writer));
  sink->finish();
  CHECK(finished == 1);
  CHECK(got.empty());
}

TEST_CASE("trace_sinks.background_sink_takes_whole_buffers", "[threads]") {
  // A background sink takes whole buffers and copied bytes in turn, in order
  // write_buffer hands the caller's buffer over and gives back another of the same capacity
  // (filled whole below, so that a smaller one shows under ASan); write() copies. Mixed, the
  // bytes arrive as sent.
  std::string got;
  std::atomic<int> finished{0};
  std::thread::id writer;
  auto sink = make_background_sink(std::make_unique<Recorder>(&got, &finished, &writer));
  std::mt19937_64 rng(5);
  std::string sent;
  const std::size_t capacities[] = {1 << 20, (1 << 20) + 4096, 777};
  for (int i = 0; i < 60; ++i) {
    const std::size_t cap = capacities[i % 3];
    auto buffer = std::make_unique<char[]>(cap);
    for (int j = 0; j < 3; ++j) {
      for (std::size_t k = 0; k < cap; ++k) buffer[k] = static_cast<char>(rng());
      const std::size_t size = rng() % (cap + 1);
      sent.append(buffer.get(), size);
      sink->write_buffer(buffer, size, cap);
      REQUIRE(buffer);
    }
    const std::string copied(rng() % 5000, static_cast<char>('a' + i % 26));
    sink->write(copied.data(), copied.size());
    sent += copied;
  }
  sink->finish();
  CHECK(finished == 1);
  CHECK(got.size() == sent.size());
  CHECK(got == sent);
  CHECK(writer != std::this_thread::get_id());
}

TEST_CASE("trace_sinks.failure_background_sink_s_inner", "[threads]") {
  // A failure of the background sink's inner sink reaches write_buffer's caller
  std::string got;
  std::atomic<int> finished{0};
  std::thread::id writer;
  auto inner = std::make_unique<Recorder>(&got, &finished, &writer);
  inner->fail_at = 3;
  auto sink = make_background_sink(std::move(inner));
  const std::size_t cap = 1 << 16;
  auto buffer = std::make_unique<char[]>(cap);
  bool thrown = false;
  try {
    for (int i = 0; i < 64; ++i) {
      std::fill(buffer.get(), buffer.get() + cap, 'y');  // whatever the sink gave back
      sink->write_buffer(buffer, cap, cap);
    }
    sink->finish();
  } catch (const std::runtime_error& e) {
    thrown = true;
    CHECK(std::string(e.what()) == "disk on fire");
  }
  CHECK(thrown);
  REQUIRE(buffer);  // still a buffer of `cap` bytes after the throw
  std::fill(buffer.get(), buffer.get() + cap, 'z');
  CHECK(finished == 0);
  CHECK(got.size() == 2 * cap);
}

TEST_CASE("trace_sinks.failure_background_sink_s_inner_2", "[threads]") {
  // A failure of the background sink's inner sink reaches the caller
  for (int fail_at : {1, 2, 5}) {
    INFO("fails at write " << fail_at);
    std::string got;
    std::atomic<int> finished{0};
    std::thread::id writer;
    auto inner = std::make_unique<Recorder>(&got, &finished, &writer);
    inner->fail_at = fail_at;
    auto sink = make_background_sink(std::move(inner));
    // Far more than the blocks that may wait: a write or finish must throw, not block for good.
    const std::string block(1 << 20, 'x');
    bool thrown = false;
    try {
      for (int i = 0; i < 64; ++i) sink->write(block.data(), block.size());
      sink->finish();
    } catch (const std::runtime_error& e) {
      thrown = true;
      CHECK(std::string(e.what()) == "disk on fire");
    }
    CHECK(thrown);
    CHECK(finished == 0);
    CHECK(got.size() == static_cast<std::size_t>(fail_at - 1) << 20);
  }
}

TEST_CASE("trace_sinks.background_sink_dropped_unfinished_stops", "[threads]") {
  // A background sink dropped unfinished stops its thread and finishes nothing
  std::string got;
  std::atomic<int> finished{0};
  std::thread::id writer;
  {
    auto sink = make_background_sink(std::make_unique<Recorder>(&got, &finished, &writer));
    feed(*sink, std::size_t{6} << 20, 7);
  }
  CHECK(finished == 0);
  CHECK(got.size() <= std::size_t{6} << 20);
}

TEST_CASE("trace_sinks.gzip_through_background_sink_same", "[threads]") {
  // gzip through a background sink is the same file as gzip on the caller's thread
  std::ostringstream direct, background;
  auto a = make_gzip_sink(direct);
  auto b = make_background_sink(make_gzip_sink(background));
  std::string sent_a, sent_b;
  {
    struct Tee : ByteSink {
      ByteSink& x;
      ByteSink& y;
      Tee(ByteSink& p, ByteSink& q) : x(p), y(q) {}
      void write(const char* d, std::size_t n) override {
        x.write(d, n);
        y.write(d, n);
      }
      void finish() override {
        x.finish();
        y.finish();
      }
    } tee(*a, *b);
    sent_a = feed(tee, std::size_t{5} << 20, 11);
    tee.finish();
  }
  // Block boundaries differ (the background sink writes whole blocks), so compare what inflates.
  CHECK(gunzip(background.str()) == sent_a);
  CHECK(gunzip(direct.str()) == sent_a);
}

namespace {

// JSON-like text that compresses as a trace does: repeated keys, changing numbers.
std::string trace_like(std::size_t total, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s;
  while (s.size() < total) {
    s += "{\"name\":\"" + std::to_string(rng() % 64) + "F" + std::to_string(rng() % 4096) +
         "\",\"ph\":\"X\",\"ts\":" + std::to_string(rng() % 100000000) +
         ".000000,\"dur\":1000.000000,\"pid\":" + std::to_string(rng() % 64) + "},\n";
  }
  return s;
}

// `bytes` to `sink` in pieces: a byte at a time for the first 4 KiB, then random sizes.
void write_in_pieces(ByteSink& sink, const std::string& bytes, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::size_t at = 0;
  for (; at < std::min<std::size_t>(bytes.size(), 4096); ++at) sink.write(bytes.data() + at, 1);
  while (at < bytes.size()) {
    const std::size_t n = std::min<std::size_t>(
        bytes.size() - at, std::uniform_int_distribution<std::size_t>(0, 2 << 20)(rng));
    sink.write(bytes.data() + at, n);
    at += n;
  }
  sink.finish();
}

// `bytes` as the JSON encoder hands them over: whole buffers of `capacity` (a spare coming back
// each time), with plain writes between some of them.
void hand_over_buffers(ByteSink& sink, const std::string& bytes, std::size_t capacity,
                       unsigned seed) {
  std::mt19937_64 rng(seed);
  auto buffer = std::make_unique<char[]>(capacity);
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::size_t n = std::min<std::size_t>(
        bytes.size() - at, std::uniform_int_distribution<std::size_t>(0, capacity)(rng));
    if (rng() % 5 == 0) {
      n = std::min<std::size_t>(n, 5000);
      sink.write(bytes.data() + at, n);
    } else {
      std::memcpy(buffer.get(), bytes.data() + at, n);
      sink.write_buffer(buffer, n, capacity);
      REQUIRE(buffer != nullptr);
    }
    at += n;
  }
  sink.finish();
}

using Factory = std::function<std::unique_ptr<ByteSink>(std::ostream&)>;

// zlib's encoder, and ISA-L's where the build has it.
std::vector<std::pair<std::string, Factory>> gzip_encoders() {
  std::vector<std::pair<std::string, Factory>> encoders = {
      {"zlib", [](std::ostream& out) { return make_zlib_gzip_sink(out); }}};
  std::ostringstream probe;
  if (make_isal_gzip_sink(probe))
    encoders.emplace_back("isal", [](std::ostream& out) { return make_isal_gzip_sink(out); });
  else
    WARN("this build has no ISA-L: only zlib's gzip encoder is tested");
  return encoders;
}

}  // namespace

TEST_CASE("trace_sinks.gzip_encoder_writes_member_inflates", "[trace]") {
  // Each gzip encoder writes one member that inflates to its input, in equal bytes again
  const std::string text = trace_like(std::size_t{3} << 20, 5);
  for (const auto& [name, make] : gzip_encoders()) {
    INFO("encoder " << name);
    {  // nothing written: an empty member
      std::ostringstream out;
      auto sink = make(out);
      sink->finish();
      CHECK(gunzip(out.str()).empty());
    }
    {  // text as a trace's, in pieces down to single bytes, twice
      std::ostringstream a, b;
      auto sa = make(a);
      auto sb = make(b);
      write_in_pieces(*sa, text, 9);
      write_in_pieces(*sb, text, 9);
      CHECK(gunzip(a.str()) == text);
      CHECK(a.str().size() < text.size() / 4);
      CHECK(a.str() == b.str());
    }
    {  // random bytes, which do not compress (stored blocks, output larger than input)
      std::ostringstream out;
      auto sink = make(out);
      const std::string sent = feed(*sink, std::size_t{5} << 20, 13);
      sink->finish();
      CHECK(gunzip(out.str()) == sent);
    }
    {  // whole buffers handed over, small and large, with writes between them
      for (std::size_t capacity : {std::size_t{1000}, std::size_t{40000}, std::size_t{1} << 20}) {
        std::ostringstream out;
        auto sink = make(out);
        hand_over_buffers(*sink, text, capacity, 17);
        CHECK(gunzip(out.str()) == text);
      }
    }
  }
}

TEST_CASE("trace_sinks.gzip_sink_isa_l_s", "[trace]") {
  // The gzip sink is ISA-L's where the build has it
  const std::string text = trace_like(std::size_t{1} << 20, 6);
  std::ostringstream chosen, isal;
  auto sink = make_gzip_sink(chosen);
  write_in_pieces(*sink, text, 3);
  auto reference = make_isal_gzip_sink(isal);
  if (!reference) {
    WARN("this build has no ISA-L: the gzip sink is zlib's");
    std::ostringstream zlib;
    auto z = make_zlib_gzip_sink(zlib);
    write_in_pieces(*z, text, 3);
    CHECK(chosen.str() == zlib.str());
    return;
  }
  write_in_pieces(*reference, text, 3);
  CHECK(chosen.str() == isal.str());
  CHECK(gunzip(chosen.str()) == text);
}
