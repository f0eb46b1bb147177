// The JSON form gzip-compressed (Perfetto opens .json.gz directly): the JSON encoder into a gzip
// sink (ISA-L's where the build has it, zlib's otherwise; deterministic bytes either way).
#include "ppsim/viz/trace_format.hpp"
#include "trace_encoder.hpp"

namespace ppsim::viz::trace_formats {

void register_json_gz(TraceFormatRegistry& registry) {
  registry.add({"json.gz",
                {"gz", "gzip"},
                {".gz"},
                "FILE.json.gz (gzipped)",
                detail::make_gzip_sink,
                detail::make_json_encoder});
}

}  // namespace ppsim::viz::trace_formats
