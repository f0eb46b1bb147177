// Reading Kineto traces: the file (gzip or not), the JSON filtered while it is parsed so that only
// profiler steps and pipeline ranges are kept (a trace of 1 GB holds millions of kernel events).
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <type_traits>

#include "ppsim/base/excerpt.hpp"
#include "ppsim/profile/kineto.hpp"

namespace ppsim::profile {

using nlohmann::json;
using schedules::OpKind;

namespace {

constexpr int kMaxDepth = 64;

std::optional<OpKind> kind_of_letter(std::string_view s) {
  if (s == "F") return OpKind::F;
  if (s == "B") return OpKind::B;
  if (s == "I") return OpKind::I;
  if (s == "W") return OpKind::W;
  return std::nullopt;
}

std::string read_bytes(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw ProfileError(fmt::format("{}: cannot open the trace", path));
  unsigned char magic[2] = {0, 0};
  probe.read(reinterpret_cast<char*>(magic), 2);
  probe.close();
  std::string out;
  if (magic[0] == 0x1f && magic[1] == 0x8b) {  // gzip
    std::unique_ptr<gzFile_s, decltype(&gzclose)> gz(gzopen(path.c_str(), "rb"), gzclose);
    if (!gz) throw ProfileError(fmt::format("{}: cannot open the trace", path));
    char buf[1 << 16];
    for (;;) {
      const int n = gzread(gz.get(), buf, sizeof buf);
      if (n < 0) throw ProfileError(fmt::format("{}: not a readable gzip file (truncated?)", path));
      if (n == 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      if (out.size() > kMaxTraceBytes)
        throw ProfileError(fmt::format("{}: over {} bytes uncompressed", path, kMaxTraceBytes));
    }
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0) throw ProfileError(fmt::format("{}: cannot read the trace", path));
  if (static_cast<std::size_t>(size) > kMaxTraceBytes)
    throw ProfileError(fmt::format("{}: over {} bytes", path, kMaxTraceBytes));
  out.resize(static_cast<std::size_t>(size));
  in.seekg(0);
  in.read(out.data(), size);
  if (!in) throw ProfileError(fmt::format("{}: cannot read the trace", path));
  return out;
}

// `where` names the event in the message: a string, or a callable making one (a trace holds
// millions of kernels, and the text is needed only for a bad one).
template <typename Where>
double number(const json& e, const char* key, const Where& where) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number() || !std::isfinite(it->get<double>())) {
    std::string w;
    if constexpr (std::is_invocable_v<Where>)
      w = where();
    else
      w = where;
    throw ProfileError(
        fmt::format("{}: key '{}': expected a finite number, got {}", w, key,
                    it == e.end() ? std::string("nothing") : base::excerpt(it->dump(), 60)));
  }
  return it->get<double>();
}

// An integer arg (a number, or a string of digits as some writers leave them); nullopt else.
std::optional<std::int64_t> int_arg(const json& args, const char* key) {
  const auto it = args.find(key);
  if (it == args.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_number_float()) {
    const double v = it->get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 9e15)
      return static_cast<std::int64_t>(v);
    return std::nullopt;
  }
  if (it->is_string()) {
    const std::string& t = it->get_ref<const std::string&>();
    if (!t.empty() && t.size() <= 15 && t.find_first_not_of("0123456789") == std::string::npos)
      return std::stoll(t);
  }
  return std::nullopt;
}

// Bytes per element of the dtypes record_param_comms names (c10's ScalarType names); 0: unknown.
int dtype_bytes(const std::string& d) {
  static const std::pair<const char*, int> kSizes[] = {
      {"Float", 4},         {"Double", 8},        {"Half", 2},        {"BFloat16", 2},
      {"Byte", 1},          {"Char", 1},          {"Bool", 1},        {"Short", 2},
      {"Int", 4},           {"Long", 8},          {"UInt16", 2},      {"UInt32", 4},
      {"UInt64", 8},        {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}, {"ComplexFloat", 8},
      {"ComplexDouble", 16}};
  for (const auto& [name, size] : kSizes)
    if (d == name) return size;
  return 0;
}

// "Process Group Ranks": a list of ints, or its text ("[0, 1]"). Empty when neither.
std::vector<std::int64_t> group_ranks(const json& args) {
  const auto it = args.find("Process Group Ranks");
  std::vector<std::int64_t> out;
  if (it == args.end()) return out;
  if (it->is_array()) {
    for (const auto& v : *it) {
      if (!v.is_number_integer()) return {};
      out.push_back(v.get<std::int64_t>());
    }
    return out;
  }
  if (!it->is_string()) return out;
  std::int64_t cur = -1;
  for (const char c : it->get_ref<const std::string&>()) {
    if (c >= '0' && c <= '9') {
      cur = (cur < 0 ? 0 : cur) * 10 + (c - '0');
      if (cur > 1'000'000) return {};
    } else if (c == ',' || c == ']') {
      if (cur >= 0) out.push_back(cur);
      cur = -1;
    } else if (c != '[' && c != ' ') {
      return {};
    }
  }
  return out;
}

// A record_param_comms range of a send or a receive, else nullopt. Its peer: "Dst Rank" /
// "Src Rank" (global), else "Rank" (the peer's rank in its group, PyTorch's ProcessGroupNCCL
// passes it so) through "Process Group Ranks".
std::optional<CommEvent> comm_event(const json& e) {
  const auto a = e.find("args");
  if (a == e.end() || !a->is_object()) return std::nullopt;
  const auto coll = a->find("Collective name");
  if (coll == a->end() || !coll->is_string()) return std::nullopt;
  const std::string& c = coll->get_ref<const std::string&>();
  CommEvent out;
  if (c == "send" || c == "isend")
    out.send = true;
  else if (c != "recv" && c != "irecv")
    return std::nullopt;
  std::optional<std::int64_t> peer = int_arg(*a, out.send ? "Dst Rank" : "Src Rank");
  if (!peer) {
    peer = int_arg(*a, "Rank");
    const auto ranks = group_ranks(*a);
    if (peer && !ranks.empty())
      peer = *peer >= 0 && *peer < static_cast<std::int64_t>(ranks.size())
                 ? std::optional(ranks[static_cast<std::size_t>(*peer)])
                 : std::nullopt;
  }
  if (!peer || *peer < 0 || *peer > 1'000'000) return std::nullopt;
  out.peer = static_cast<int>(*peer);
  const auto nelems =
      std::max(int_arg(*a, "In msg nelems").value_or(0), int_arg(*a, "Out msg nelems").value_or(0));
  const auto dtype = a->find("dtype");
  const int size = dtype != a->end() && dtype->is_string() ? dtype_bytes(*dtype) : 0;
  if (size > 0 && nelems > 0 && nelems < (std::int64_t{1} << 50)) out.bytes = nelems * size;
  return out;
}

}  // namespace

std::vector<ActionPattern> default_patterns() {
  ActionPattern p;
  p.text = "PP:<stage><F|B|I|W><microbatch> (PyTorch pipelining)";
  p.regex = std::regex("PP:(\\d{1,6})([FBIW])(\\d{1,9})");
  p.stage_group = 1;
  p.kind_group = 2;
  p.microbatch_group = 3;
  return {p};
}

std::vector<ActionPattern> read_map(const std::string& path) {
  const std::string text = read_bytes(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ProfileError(fmt::format("{}: malformed JSON: {}", path, base::excerpt(e.what(), 160)));
  }
  auto fail = [&](const std::string& key, const std::string& what) {
    throw ProfileError(fmt::format("{}: key '{}': {}", path, key, what));
  };
  if (!j.is_object() || !j.contains("actions") || !j["actions"].is_array() ||
      j["actions"].empty() || j.size() != 1)
    fail("actions", "expected {\"actions\": [{\"pattern\": REGEX, \"kind\": \"F\", ...}, ...]}");
  std::vector<ActionPattern> out;
  for (std::size_t i = 0; i < j["actions"].size(); ++i) {
    const json& a = j["actions"][i];
    const std::string at = fmt::format("actions[{}]", i);
    if (!a.is_object() || !a.contains("pattern") || !a["pattern"].is_string())
      fail(at + ".pattern", "expected a regular expression (a string)");
    ActionPattern p;
    p.text = a["pattern"].get<std::string>();
    try {
      p.regex = std::regex(p.text);
    } catch (const std::regex_error& e) {
      fail(at + ".pattern", fmt::format("not a regular expression: {}", e.what()));
    }
    const unsigned groups = static_cast<unsigned>(p.regex.mark_count());
    auto group = [&](const char* key) {
      if (!a.contains(key)) return 0;
      if (!a[key].is_number_integer() || a[key].get<long long>() < 1 ||
          a[key].get<long long>() > static_cast<long long>(groups))
        fail(at + "." + key, fmt::format("expected a capture group from 1 to {}", groups));
      return a[key].get<int>();
    };
    for (const auto& item : a.items())
      if (item.key() != "pattern" && item.key() != "kind" && item.key() != "kind_group" &&
          item.key() != "stage" && item.key() != "microbatch")
        fail(at + "." + item.key(), "unknown key (pattern, kind, kind_group, stage, microbatch)");
    if (a.contains("kind")) {
      if (!a["kind"].is_string() || !kind_of_letter(a["kind"].get<std::string>()))
        fail(at + ".kind", "expected \"F\", \"B\", \"I\" or \"W\"");
      p.kind = kind_of_letter(a["kind"].get<std::string>());
    }
    p.kind_group = group("kind_group");
    if (!p.kind && !p.kind_group) fail(at + ".kind", "give kind or kind_group");
    p.stage_group = group("stage");
    p.microbatch_group = group("microbatch");
    if (!p.microbatch_group)
      fail(at + ".microbatch", "expected the capture group of the microbatch");
    out.push_back(std::move(p));
  }
  return out;
}

RankTrace parse_trace(std::string_view text, const std::string& source,
                      const std::vector<ActionPattern>& patterns) {
  RankTrace t;
  t.file = source;
  std::string top_key;
  std::size_t index = 0;
  std::optional<std::string> error;
  auto keep = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth > kMaxDepth) {
      error = fmt::format("{}: nested deeper than {}", source, kMaxDepth);
      throw ProfileError(*error);
    }
    if (depth == 1 && event == json::parse_event_t::key) {
      top_key = parsed.get<std::string>();
      return true;
    }
    if (depth == 1 &&
        (event == json::parse_event_t::object_end || event == json::parse_event_t::array_end ||
         event == json::parse_event_t::value))
      return top_key == "traceEvents" || top_key == "distributedInfo";
    if (depth != 2 || top_key != "traceEvents" || event != json::parse_event_t::object_end)
      return true;
    // One event: kept only if it is a complete range ("ph": "X") we need.
    const std::size_t i = index++;
    ++t.events;
    const auto name = parsed.find("name");
    const auto ph = parsed.find("ph");
    if (name == parsed.end() || !name->is_string() || ph == parsed.end() || *ph != "X")
      return false;
    const std::string& n = name->get_ref<const std::string&>();
    auto note = [&] {  // a name that is not an action, for the message when no action is found
      if (t.sample.size() < 6 && std::find(t.sample.begin(), t.sample.end(), n) == t.sample.end())
        t.sample.push_back(base::excerpt(n, 60));
    };
    const auto cat_it = parsed.find("cat");
    const std::string_view cat = cat_it != parsed.end() && cat_it->is_string()
                                     ? std::string_view(cat_it->get_ref<const std::string&>())
                                     : std::string_view();
    const auto args = parsed.find("args");
    const bool has_args = args != parsed.end() && args->is_object();
    // Launches and the GPU activity they started, by correlation id (times checked as ranges').
    if (has_args && (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "kernel" ||
                     cat == "gpu_memcpy" || cat == "gpu_memset")) {
      note();
      const auto corr = int_arg(*args, "correlation");
      if (!corr) return false;
      const auto where = [&] {
        return fmt::format("{}: traceEvents[{}] ('{}')", source, i, base::excerpt(n, 60));
      };
      const double ts = number(parsed, "ts", where);
      if (cat == "cuda_runtime" || cat == "cuda_driver") {
        t.launches.push_back({ts, *corr, int_arg(parsed, "tid").value_or(-1)});
      } else {
        const double dur = number(parsed, "dur", where);
        if (dur < 0) throw ProfileError(fmt::format("{}: key 'dur': expected >= 0", where()));
        t.device.push_back({ts, dur, *corr});
      }
      return false;
    }
    if (n == "record_param_comms") {
      if (auto c = comm_event(parsed)) {
        const std::string where = fmt::format("{}: traceEvents[{}] ('{}')", source, i, n);
        c->ts = number(parsed, "ts", where);
        c->dur = number(parsed, "dur", where);
        if (c->dur < 0) throw ProfileError(fmt::format("{}: key 'dur': expected >= 0", where));
        c->tid = int_arg(parsed, "tid").value_or(-1);
        c->index = i;
        t.comms.push_back(*c);
      }
      return false;
    }
    const bool step = n.rfind("ProfilerStep#", 0) == 0;
    // An action, or an overlapped pair (`PP:(0F7;7B3)OVERLAP_F_B`, read by the importer).
    bool action = n.starts_with("PP:(") && n.ends_with(")OVERLAP_F_B");
    for (const auto& p : patterns) action = action || std::regex_match(n, p.regex);
    if (!step && !action) {
      note();
      return false;
    }
    const std::string where =
        fmt::format("{}: traceEvents[{}] ('{}')", source, i, base::excerpt(n, 60));
    RangeEvent r;
    r.name = n;
    r.ts = number(parsed, "ts", where);
    r.dur = number(parsed, "dur", where);
    if (r.dur < 0) throw ProfileError(fmt::format("{}: key 'dur': expected >= 0", where));
    r.index = i;
    r.tid = int_arg(parsed, "tid").value_or(-1);
    r.device = cat == "gpu_user_annotation";
    (step ? t.steps : t.ranges).push_back(std::move(r));
    return false;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), keep);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 2e308
    throw ProfileError(
        fmt::format("{}: malformed or truncated JSON ({})", source, base::excerpt(e.what(), 160)));
  }
  if (!root.is_object() || !root.contains("traceEvents") || !root["traceEvents"].is_array())
    throw ProfileError(fmt::format(
        "{}: key 'traceEvents': expected a Chrome trace object with a traceEvents array (as "
        "torch.profiler's export_chrome_trace writes)",
        source));
  if (root.contains("distributedInfo") && root["distributedInfo"].is_object()) {
    const json& d = root["distributedInfo"];
    if (d.contains("rank")) {
      if (!d["rank"].is_number_integer() || d["rank"].get<long long>() < 0 ||
          d["rank"].get<long long>() > 1'000'000)
        throw ProfileError(
            fmt::format("{}: key 'distributedInfo.rank': expected an integer >= 0", source));
      t.rank = d["rank"].get<int>();
    }
  }
  return t;
}

RankTrace read_trace(const std::string& path, const std::vector<ActionPattern>& patterns) {
  const std::string text = read_bytes(path);
  return parse_trace(text, path, patterns);
}

}  // namespace ppsim::profile
