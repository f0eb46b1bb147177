// gzip through ISA-L's igzip (Debian's libisal): deflate at level 1 in about three times the speed
// of zlib's level 1, into a slightly smaller file (docs/BENCHMARKS.md, Round 14). Compiled
// without it where the build found no ISA-L; make_gzip_sink then uses zlib.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace_encoder.hpp"

#if PPSIM_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

namespace ppsim::viz::detail {

#if PPSIM_HAVE_ISAL
namespace {

// Level 2 was as fast here for a file 0.5-1% smaller, with a hash table four times as large; level
// 1 is the level the format has promised. The generic gzip header has no time stamp and no name,
// so equal input written in equal pieces gives equal bytes.
class IsalGzipSink : public ByteSink {
 public:
  explicit IsalGzipSink(std::ostream& out)
      : out_(out), chunk_(1 << 18), level_buf_(ISAL_DEF_LVL1_DEFAULT) {
    isal_deflate_init(&z_);
    z_.level = 1;
    z_.level_buf = level_buf_.data();
    z_.level_buf_size = static_cast<std::uint32_t>(level_buf_.size());
    z_.gzip_flag = IGZIP_GZIP;
    z_.flush = NO_FLUSH;
  }
  void write(const char* data, std::size_t size) override {
    while (size > 0) {
      // avail_in is 32 bits wide: feed at most 1 GiB at a time.
      const std::size_t n = std::min<std::size_t>(size, std::size_t{1} << 30);
      z_.next_in = reinterpret_cast<std::uint8_t*>(const_cast<char*>(data));
      z_.avail_in = static_cast<std::uint32_t>(n);
      pump();
      data += n;
      size -= n;
    }
  }
  void finish() override {
    z_.next_in = nullptr;
    z_.avail_in = 0;
    z_.end_of_stream = 1;
    pump();
    out_.flush();
  }

 private:
  // Until the input is taken (and, at the end, the trailer written), a chunk of output at a time.
  void pump() {
    while (true) {
      z_.next_out = reinterpret_cast<std::uint8_t*>(chunk_.data());
      z_.avail_out = static_cast<std::uint32_t>(chunk_.size());
      const int rc = isal_deflate(&z_);
      if (rc != COMP_OK)
        throw std::runtime_error("gzip: ISA-L failed (" + std::to_string(rc) + ")");
      const std::size_t produced = chunk_.size() - z_.avail_out;
      out_.write(chunk_.data(), static_cast<std::streamsize>(produced));
      const bool done = z_.end_of_stream ? z_.internal_state.state == ZSTATE_END
                                         : z_.avail_in == 0 && z_.avail_out != 0;
      if (done) return;
    }
  }

  std::ostream& out_;
  isal_zstream z_{};
  std::vector<char> chunk_;
  std::vector<std::uint8_t> level_buf_;
};

}  // namespace

std::unique_ptr<ByteSink> make_isal_gzip_sink(std::ostream& out) {
  return std::make_unique<IsalGzipSink>(out);
}
#else
std::unique_ptr<ByteSink> make_isal_gzip_sink(std::ostream&) {
  return nullptr;
}
#endif

}  // namespace ppsim::viz::detail
