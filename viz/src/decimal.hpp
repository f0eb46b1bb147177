#pragma once
// Integers written as decimal text through a bare pointer, for the trace writers' hot paths: the
// same text as fmt's "{}", without its buffer checks. The caller makes room (at most 20 bytes for
// an unsigned or a signed 64-bit integer). Internal to viz.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ppsim::viz::detail {

inline constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

inline int decimal_digits(std::uint64_t v) {
  static constexpr std::uint64_t kPow10[] = {1ULL,
                                             10ULL,
                                             100ULL,
                                             1000ULL,
                                             10000ULL,
                                             100000ULL,
                                             1000000ULL,
                                             10000000ULL,
                                             100000000ULL,
                                             1000000000ULL,
                                             10000000000ULL,
                                             100000000000ULL,
                                             1000000000000ULL,
                                             10000000000000ULL,
                                             100000000000000ULL,
                                             1000000000000000ULL,
                                             10000000000000000ULL,
                                             100000000000000000ULL,
                                             1000000000000000000ULL,
                                             10000000000000000000ULL};
  // bit_width * log10(2) is the answer or one less. `v | 1` makes 0 one digit and changes no
  // other answer (no power of ten is one more than an even number).
  const int guess = static_cast<int>((std::bit_width(v | 1) * 1233) >> 12);
  return guess + ((v | 1) >= kPow10[guess] ? 1 : 0);
}

// `count` digits of v (its lowest ones), ending at `end`.
inline void digits_back(char* end, std::uint64_t v, int count) {
  while (count >= 2) {
    end -= 2;
    std::memcpy(end, kDigitPairs + 2 * (v % 100), 2);
    v /= 100;
    count -= 2;
  }
  if (count) *--end = static_cast<char>('0' + v % 10);
}

inline char* put_uint(char* p, std::uint64_t v) {
  if (v < 10) {  // most pids, tids and small arguments
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  if (v < 100) {
    std::memcpy(p, kDigitPairs + 2 * v, 2);
    return p + 2;
  }
  const int n = decimal_digits(v);
  digits_back(p + n, v, n);
  return p + n;
}

inline char* put_int(char* p, std::int64_t v) {
  if (v >= 0) return put_uint(p, static_cast<std::uint64_t>(v));
  *p++ = '-';
  return put_uint(p, 0 - static_cast<std::uint64_t>(v));
}

inline char* put(char* p, std::string_view s) {
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

}  // namespace ppsim::viz::detail
