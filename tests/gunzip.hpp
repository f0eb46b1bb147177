#pragma once
// A gzip file's content, for tests of the .json.gz trace: it must be one gzip member with nothing
// after it.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <string>

namespace ppsim::test {

inline std::string gunzip(const std::string& gz) {
  z_stream z{};
  REQUIRE(inflateInit2(&z, 15 + 16) == Z_OK);
  std::string out;
  char chunk[1 << 14];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    REQUIRE((rc == Z_OK || rc == Z_STREAM_END));
    out.append(chunk, sizeof chunk - z.avail_out);
  }
  CHECK(z.avail_in == 0);  // one gzip member, nothing after it
  inflateEnd(&z);
  return out;
}

}  // namespace ppsim::test
