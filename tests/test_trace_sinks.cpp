// The byte sinks of streamed traces (viz/src/trace_encoder.hpp): the background sink hands the
// same bytes, in the same order, to its inner sink on a thread of its own, passes on the inner
// sink's failure, and can be dropped unfinished; gzip through it gives the same file.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "gunzip.hpp"
#include "trace_encoder.hpp"

using ppsim::test::gunzip;
using ppsim::viz::detail::ByteSink;
using ppsim::viz::detail::make_background_sink;
using ppsim::viz::detail::make_gzip_sink;

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

TEST_CASE("A background sink passes every byte on in order, from another thread", "[threads]") {
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

TEST_CASE("A background sink takes whole buffers and copied bytes in turn, in order", "[threads]") {
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

TEST_CASE("A failure of the background sink's inner sink reaches write_buffer's caller",
          "[threads]") {
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

TEST_CASE("A failure of the background sink's inner sink reaches the caller", "[threads]") {
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

TEST_CASE("A background sink dropped unfinished stops its thread and finishes nothing",
          "[threads]") {
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

TEST_CASE("gzip through a background sink is the same file as gzip on the caller's thread",
          "[threads]") {
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
