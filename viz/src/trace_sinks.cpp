// Byte sinks of streamed traces: straight to the stream, or through zlib's gzip encoder; either
// on a thread of its own.
#include <zlib.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

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

// Level 1: a trace compresses about 10x even so, and higher levels cost several times the
// writing time. zlib's gzip header carries no time stamp, so equal input gives equal bytes.
class GzipSink : public ByteSink {
 public:
  explicit GzipSink(std::ostream& out) : out_(out), chunk_(1 << 18) {
    if (deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("gzip: zlib could not start");
  }
  ~GzipSink() override { deflateEnd(&z_); }
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
    fill_.reserve(kBlock);
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
      const std::size_t n = std::min(size, kBlock - fill_.size());
      fill_.append(data, n);
      data += n;
      size -= n;
      if (fill_.size() == kBlock) hand_over();
    }
  }
  void finish() override {
    if (!direct_ && !fill_.empty()) hand_over();
    stop();
    if (error_) std::rethrow_exception(error_);
    inner_->finish();
  }

 private:
  void hand_over() {
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return full_.size() < kDepth || error_; });
    if (error_) {
      lock.unlock();
      stop();
      std::rethrow_exception(error_);
    }
    full_.push_back(std::move(fill_));
    if (spare_.empty()) {
      fill_ = std::string();
      fill_.reserve(kBlock);
    } else {
      fill_ = std::move(spare_.back());
      spare_.pop_back();
    }
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
      std::string block;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return !full_.empty() || done_; });
        if (full_.empty()) return;
        block = std::move(full_.front());
        full_.pop_front();
      }
      try {
        inner_->write(block.data(), block.size());
      } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
        full_.clear();
        room_.notify_all();
        return;
      }
      block.clear();
      std::lock_guard lock(mutex_);
      spare_.push_back(std::move(block));
      room_.notify_all();
    }
  }

  std::unique_ptr<ByteSink> inner_;
  std::string fill_;  // the caller's: bytes not yet handed over
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<std::string> full_;    // handed over, not yet written
  std::vector<std::string> spare_;  // written blocks, for reuse
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
std::unique_ptr<ByteSink> make_gzip_sink(std::ostream& out) {
  return std::make_unique<GzipSink>(out);
}

}  // namespace ppsim::viz::detail
