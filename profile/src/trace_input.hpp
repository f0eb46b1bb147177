#pragma once
// The bytes of one trace as a stream (internal to profile/): a file, gzip-compressed or not, read
// 64 KiB at a time and never held whole, or text in memory; each bound of ReadLimits on bytes is
// checked as the bytes arrive, before they are used.
#include <zlib.h>

#include <array>
#include <streambuf>
#include <string>
#include <string_view>

#include "ppsim/profile/kineto.hpp"

namespace ppsim::profile::detail {

class TraceInput : public std::streambuf {
 public:
  TraceInput(const std::string& path, const ReadLimits& limits);  // throws ProfileError
  TraceInput(std::string_view text, const std::string& source, const ReadLimits& limits);
  ~TraceInput() override;
  TraceInput(const TraceInput&) = delete;
  TraceInput& operator=(const TraceInput&) = delete;

  // Bytes handed to the parser so far.
  std::size_t position() const { return consumed_ + static_cast<std::size_t>(gptr() - eback()); }
  // A JSON value ended here: the next may be at most max_gap bytes on (whitespace or one token).
  void mark();

 protected:
  int_type underflow() override;

 private:
  [[noreturn]] void gap_error() const;

  std::string source_;
  ReadLimits limits_;
  gzFile gz_ = nullptr;  // null: text in memory
  std::size_t consumed_ = 0, last_mark_ = 0;
  std::array<char, 1 << 16> buffer_{};
};

}  // namespace ppsim::profile::detail
