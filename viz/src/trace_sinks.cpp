// Byte sinks of streamed traces: straight to the stream, or through a gzip encoder (ISA-L's,
// isal_gzip_sink.cpp, where the build has it; zlib's otherwise); either on a thread of its own.
#include <zlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "ppsim/base/huge_pages.hpp"
#include "trace_encoder.hpp"

namespace ppsim::viz::detail {

namespace {

class StreamSink : public ByteSink {
 public:
  explicit StreamSink(std::ostream& out) : out_(out) {}
  void write(const char* data, std::size_t size) override {
    out_.write(data, static_cast<std::streamsize>(size));
  }
  void finish() override { out_.flush(); }

 private:
  std::ostream& out_;
};

// Level 1: a trace compresses about 6x even so, and higher levels cost several times the
// writing time. zlib's gzip header carries no time stamp, so equal input gives equal bytes.
class ZlibGzipSink : public ByteSink {
 public:
  explicit ZlibGzipSink(std::ostream& out) : out_(out), chunk_(1 << 18) {
    if (deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("gzip: zlib could not start");
  }
  ~ZlibGzipSink() override { deflateEnd(&z_); }
  void write(const char* data, std::size_t size) override {
    while (size > 0) {
      // avail_in is 32 bits wide: feed at most 1 GiB at a time.
      const std::size_t n = std::min<std::size_t>(size, std::size_t{1} << 30);
      z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
      z_.avail_in = static_cast<uInt>(n);
      pump(Z_NO_FLUSH);
      data += n;
      size -= n;
    }
  }
  void finish() override {
    z_.next_in = nullptr;
    z_.avail_in = 0;
    pump(Z_FINISH);
    out_.flush();
  }

 private:
  void pump(int mode) {
    while (true) {
      z_.next_out = reinterpret_cast<Bytef*>(chunk_.data());
      z_.avail_out = static_cast<uInt>(chunk_.size());
      const int rc = deflate(&z_, mode);
      if (rc == Z_STREAM_ERROR) throw std::runtime_error("gzip: zlib failed");
      const std::size_t produced = chunk_.size() - z_.avail_out;
      out_.write(chunk_.data(), static_cast<std::streamsize>(produced));
      if (mode == Z_FINISH ? rc == Z_STREAM_END : (z_.avail_in == 0 && z_.avail_out != 0)) return;
    }
  }

  std::ostream& out_;
  z_stream z_{};
  std::vector<char> chunk_;
};

// Copies with stores that bypass this core's cache (where the CPU has them): the writer thread
// then reads the block from memory, not line by line out of the other core's cache, which slowed
// the kernel's copy into the file further (P=256 .pftrace: 4.6-6.9 s of system time with plain
// copies, 4.0-5.1 s with these; docs/BENCHMARKS.md, Round 7).
void copy_uncached(char* to, const char* from, std::size_t n) {
#if defined(__SSE2__)
  if (n >= 4096) {
    std::size_t i = 0;
    for (; (reinterpret_cast<std::uintptr_t>(to + i) & 15) != 0; ++i) to[i] = from[i];
    for (; i + 16 <= n; i += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(to + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i)));
    for (; i < n; ++i) to[i] = from[i];
    _mm_sfence();  // before the block is handed to the other thread
    return;
  }
#endif
  std::memcpy(to, from, n);
}

// Hands blocks to another sink on a thread of its own, so that the caller goes on encoding while
// the kernel copies the last block into the file (a quarter of a large .pftrace's time) or zlib
// compresses it. At most kDepth blocks wait: memory stays bounded however fast the caller is.
// The inner sink is only ever used by the writer thread, and by the caller once that has ended.
class BackgroundSink : public ByteSink {
 public:
  static constexpr std::size_t kBlock = std::size_t{1} << 20;
  static constexpr std::size_t kDepth = 4;

  explicit BackgroundSink(std::unique_ptr<ByteSink> inner) : inner_(std::move(inner)) {
    try {
      writer_ = std::thread([this] { write_blocks(); });
    } catch (const std::system_error&) {
      direct_ = true;  // no thread to be had: the caller writes
    }
  }
  ~BackgroundSink() override {  // unfinished (an error on the way): what waits is dropped
    {
      std::lock_guard lock(mutex_);
      full_.clear();
    }
    stop();
  }

  void write(const char* data, std::size_t size) override {
    if (direct_) return inner_->write(data, size);
    while (size > 0) {
      if (!fill_.bytes) fill_ = take_spare(kBlock);
      const std::size_t n = std::min(size, kBlock - fill_.size);
      copy_uncached(fill_.bytes.get() + fill_.size, data, n);
      fill_.size += n;
      data += n;
      size -= n;
      if (fill_.size == kBlock) hand_over(std::exchange(fill_, Block{}));
    }
  }
  // The caller's buffer goes to the writer thread as it is, and a spare of the same capacity
  // takes its place: no copy.
  void write_buffer(std::unique_ptr<char[]>& buffer, std::size_t size,
                    std::size_t capacity) override {
    if (direct_) return inner_->write(buffer.get(), size);
    if (fill_.size > 0) hand_over(std::exchange(fill_, Block{}));  // what write() took goes first
    Block full{std::exchange(buffer, take_spare(capacity).bytes), size, capacity};
    hand_over(std::move(full));
  }
  void finish() override {
    if (!direct_ && fill_.size > 0) hand_over(std::exchange(fill_, Block{}));
    stop();
    if (error_) std::rethrow_exception(error_);
    inner_->finish();
  }

 private:
  struct Block {
    std::unique_ptr<char[]> bytes;  // `capacity` of them, not zeroed
    std::size_t size = 0;
    std::size_t capacity = 0;
  };

  // A written block of this capacity, or a new one. Spares of another capacity (the encoder's
  // buffer grew) are freed: memory stays bounded by the blocks in flight.
  Block take_spare(std::size_t capacity) {
    std::vector<Block> stale;  // freed outside the lock
    {
      std::lock_guard lock(mutex_);
      for (auto& b : spare_) {
        if (b.capacity == capacity) {
          Block found = std::move(b);
          if (&b != &spare_.back()) b = std::move(spare_.back());
          spare_.pop_back();
          return found;
        }
      }
      stale.swap(spare_);
    }
    // Allocated and faulted in outside the lock, by one call, not a fault per page.
    auto bytes = std::make_unique_for_overwrite<char[]>(capacity);
    base::prefault(bytes.get(), capacity);
    return {std::move(bytes), 0, capacity};
  }
  void hand_over(Block&& block) {
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return full_.size() < kDepth || error_; });
    if (error_) {
      lock.unlock();
      stop();
      std::rethrow_exception(error_);
    }
    full_.push_back(std::move(block));
    lock.unlock();
    ready_.notify_one();
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    ready_.notify_one();
    if (writer_.joinable()) writer_.join();
  }
  // The writer thread: blocks in order until stopped and none is left (or one failed).
  void write_blocks() {
    while (true) {
      Block block;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return !full_.empty() || done_; });
        if (full_.empty()) return;
        block = std::move(full_.front());
        full_.pop_front();
      }
      try {
        inner_->write(block.bytes.get(), block.size);
      } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
        full_.clear();
        room_.notify_all();
        return;
      }
      block.size = 0;
      std::lock_guard lock(mutex_);
      spare_.push_back(std::move(block));
      room_.notify_all();
    }
  }

  std::unique_ptr<ByteSink> inner_;
  Block fill_;  // the caller's: bytes not yet handed over
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<Block> full_;    // handed over, not yet written
  std::vector<Block> spare_;  // written, for reuse
  bool done_ = false;
  std::exception_ptr error_;
  bool direct_ = false;
  std::thread writer_;
};

}  // namespace

std::unique_ptr<ByteSink> make_background_sink(std::unique_ptr<ByteSink> inner) {
  return std::make_unique<BackgroundSink>(std::move(inner));
}

std::unique_ptr<ByteSink> make_stream_sink(std::ostream& out) {
  return std::make_unique<StreamSink>(out);
}
std::unique_ptr<ByteSink> make_zlib_gzip_sink(std::ostream& out) {
  return std::make_unique<ZlibGzipSink>(out);
}
std::unique_ptr<ByteSink> make_gzip_sink(std::ostream& out) {
  if (auto isal = make_isal_gzip_sink(out)) return isal;
  return make_zlib_gzip_sink(out);
}

}  // namespace ppsim::viz::detail
