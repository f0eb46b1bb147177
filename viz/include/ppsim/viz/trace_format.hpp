#pragma once
// A trace file format: how a streamed trace's events become bytes (docs/TRACES.md). Each format
// is one file of viz/src/trace_formats/ that registers itself (base/registry.hpp); TraceStream
// takes one, named or picked from the output file's name.
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/base/registry.hpp"

namespace ppsim::viz {

namespace detail {
class ByteSink;
class TraceEncoder;
}  // namespace detail

struct TraceFormat {
  std::string name;  // "json", "json.gz", "pftrace"
  std::vector<std::string> aliases;
  std::vector<std::string> suffixes;  // file names that end so are written in this format
  std::string help;                   // for --trace's help, e.g. "FILE.json.gz (gzipped)"
  // Where the encoded bytes go (a plain or compressing sink over `out`), and what encodes them.
  std::unique_ptr<detail::ByteSink> (*sink)(std::ostream& out) = nullptr;
  std::unique_ptr<detail::TraceEncoder> (*encoder)(detail::ByteSink& sink) = nullptr;
};
using TraceFormatRegistry = base::Registry<TraceFormat>;
void register_builtins(TraceFormatRegistry& registry);

// By name or alias; throws std::invalid_argument naming the known formats when unknown.
const TraceFormat& trace_format(std::string_view name);
// The format with the longest suffix that ends `path`; "json" when none does.
const TraceFormat& trace_format_for(
    std::string_view path, const TraceFormatRegistry& registry = TraceFormatRegistry::instance());
// Each format's help, joined: "FILE.json (Chrome JSON), FILE.json.gz (gzipped), ...".
std::string trace_formats_help();

}  // namespace ppsim::viz
