// Byte sinks of streamed traces: straight to the stream, or through zlib's gzip encoder.
#include <zlib.h>

#include <stdexcept>
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

}  // namespace

std::unique_ptr<ByteSink> make_stream_sink(std::ostream& out) {
  return std::make_unique<StreamSink>(out);
}
std::unique_ptr<ByteSink> make_gzip_sink(std::ostream& out) {
  return std::make_unique<GzipSink>(out);
}

}  // namespace ppsim::viz::detail
