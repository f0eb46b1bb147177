// libFuzzer target: see fuzz_entry.hpp (hf_config_entry) and docs/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ppsim::fuzz::hf_config_entry(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
