// Reading Kineto traces: the file (gzip or not) parsed as it is read, with a SAX handler that
// keeps only profiler steps, pipeline ranges, sends and receives, and launches and GPU events by
// correlation id (a trace of 1 GB holds millions of kernel events); nothing else is built.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <istream>
#include <type_traits>

#include "action_patterns.hpp"
#include "ppsim/base/excerpt.hpp"
#include "ppsim/profile/kineto.hpp"
#include "trace_input.hpp"

namespace ppsim::profile {

using nlohmann::json;

namespace {

constexpr int kMaxDepth = 64;

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

// The keys read of an event, of its args, and of distributedInfo; the rest is skipped unbuilt.
bool event_key(std::string_view k) {
  return k == "name" || k == "ph" || k == "cat" || k == "ts" || k == "dur" || k == "tid" ||
         k == "args";
}
bool args_key(std::string_view k) {
  return k == "Collective name" || k == "correlation" || k == "Dst Rank" || k == "Src Rank" ||
         k == "Rank" || k == "Process Group Ranks" || k == "In msg nelems" ||
         k == "Out msg nelems" || k == "dtype";
}
bool info_key(std::string_view k) {
  return k == "rank" || k == "world_size";
}

// nlohmann's SAX interface. Builds one event at a time (and distributedInfo's two numbers), hands
// it to take_event and drops it: what it holds at once is counted, and bounded.
class TraceHandler {
 public:
  TraceHandler(RankTrace& t, const std::vector<ActionPattern>& patterns, const ReadLimits& limits,
               detail::TraceInput& in)
      : t_(t), patterns_(patterns), limits_(limits), in_(in) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return value(json(v)); }
  bool string(std::string& v) {
    if (json* slot = place(); slot) {
      if (v.size() > limits_.max_string)
        throw ProfileError(fmt::format("{}: {}: a string of {} bytes (at most {} are read)",
                                       t_.file, where(), v.size(), limits_.max_string));
      *slot = std::move(v);
    }
    return true;
  }
  bool binary(json::binary_t&) { return value(json(nullptr)); }
  bool start_object(std::size_t) { return open(false); }
  bool start_array(std::size_t) { return open(true); }
  bool key(std::string& k) {
    in_.mark();
    if (depth() == 1)
      top_key_ = k;
    else
      frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    error_ = e.what();
    return false;
  }

  const std::string& error() const { return error_; }
  bool saw_events() const { return saw_events_; }
  bool root_object() const { return root_object_; }
  const json& info() const { return info_; }
  std::size_t peak_values() const { return peak_; }

 private:
  // An open container: the node it is built into (null: skipped), and for an object the key
  // of the value coming next. Depth 1 is the root, 2 a top-level member, 3 an event.
  struct Frame {
    json* node = nullptr;
    bool array = false;
    std::string key;
  };

  int depth() const { return static_cast<int>(frames_.size()); }
  bool in_events() const { return depth() == 2 && top_key_ == "traceEvents" && frames_[1].array; }
  std::string where() const { return fmt::format("traceEvents[{}]", index_); }

  // Where the value now arriving goes, or null to skip it.
  json* place() {
    in_.mark();
    if (in_events())  // an element of traceEvents that is not an object
      throw ProfileError(fmt::format("{}: {}: expected an event object", t_.file, where()));
    if (frames_.empty() || !frames_.back().node) return nullptr;
    Frame& f = frames_.back();
    if (!f.array) {
      const bool wanted = depth() == 2   ? info_key(f.key)   // distributedInfo
                          : depth() == 3 ? event_key(f.key)  // an event
                          : depth() == 4 ? args_key(f.key)   // its args
                                         : true;             // inside what those hold
      if (!wanted) return nullptr;
    }
    if (++held_ > limits_.max_event_values)
      throw ProfileError(fmt::format("{}: {}: an event of over {} values", t_.file, where(),
                                     limits_.max_event_values));
    peak_ = std::max(peak_, held_);
    if (f.array) {
      f.node->push_back(nullptr);
      return &f.node->back();
    }
    return &(*f.node)[f.key];
  }
  bool value(json v) {
    if (json* slot = place()) *slot = std::move(v);
    return true;
  }
  bool open(bool array) {
    in_.mark();
    if (depth() >= kMaxDepth)
      throw ProfileError(fmt::format("{}: nested deeper than {}", t_.file, kMaxDepth));
    json* node = nullptr;
    if (depth() == 0) {
      root_object_ = !array;
      root_array_ = array;
    } else if (depth() == 1 && !root_array_) {
      if (top_key_ == "traceEvents" && array) saw_events_ = true;
      if (top_key_ == "distributedInfo" && !array) {
        info_ = json::object();
        node = &info_;
      }
    } else if (in_events()) {
      if (array)
        throw ProfileError(fmt::format("{}: {}: expected an event object", t_.file, where()));
      event_ = json::object();
      node = &event_;
      held_ = 0;
    } else if (json* slot = place()) {
      // distributedInfo's values are numbers: a container there is kept as an empty one (an
      // error later), its contents skipped.
      *slot = array ? json::array() : json::object();
      if (depth() > 2 || frames_[1].node != &info_) node = slot;
    }
    frames_.push_back({node, array, {}});
    return true;
  }
  bool close() {
    in_.mark();
    const bool event = depth() == 3 && frames_.back().node == &event_;
    frames_.pop_back();
    if (event) {
      take_event(event_, index_++);
      event_ = json();
      held_ = 0;
    }
    return true;
  }

  void take_event(const json& e, std::size_t i);

  RankTrace& t_;
  const std::vector<ActionPattern>& patterns_;
  const ReadLimits& limits_;
  detail::TraceInput& in_;
  std::vector<Frame> frames_;
  std::string top_key_, error_;
  json event_, info_;
  std::size_t index_ = 0, held_ = 0, peak_ = 0;
  bool root_object_ = false, root_array_ = false, saw_events_ = false;
};

// One event: kept only if it is a complete range ("ph": "X") we need.
void TraceHandler::take_event(const json& parsed, std::size_t i) {
  const std::string& source = t_.file;
  RankTrace& t = t_;
  ++t.events;
  const auto name = parsed.find("name");
  const auto ph = parsed.find("ph");
  if (name == parsed.end() || !name->is_string() || ph == parsed.end() || *ph != "X") return;
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
    if (!corr) return;
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
    return;
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
    return;
  }
  const bool step = n.rfind("ProfilerStep#", 0) == 0;
  // An action, or an overlapped pair (`PP:(0F7;7B3)OVERLAP_F_B`, read by the importer).
  bool action =
      n.size() <= kMaxActionNameBytes && n.starts_with("PP:(") && n.ends_with(")OVERLAP_F_B");
  for (const auto& p : patterns_) action = action || detail::matches(p, n);
  if (!step && !action) {
    note();
    return;
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
}

// distributedInfo's `key`, an integer from `lo` to 1'000'000 when given.
int info_int(const json& info, const char* key, long long lo, const std::string& source) {
  if (!info.is_object() || !info.contains(key)) return -1;
  const json& v = info[key];
  if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > 1'000'000)
    throw ProfileError(
        fmt::format("{}: key 'distributedInfo.{}': expected an integer >= {}", source, key, lo));
  return v.get<int>();
}

RankTrace parse_input(detail::TraceInput& in, const std::string& source,
                      const std::vector<ActionPattern>& patterns, const ReadLimits& limits,
                      ReadStats* stats) {
  RankTrace t;
  t.file = source;
  TraceHandler handler(t, patterns, limits, in);
  struct Account {  // the stats, also when parsing throws
    ReadStats* stats;
    const detail::TraceInput& in;
    const TraceHandler& h;
    ~Account() {
      if (stats) *stats = {in.position(), h.peak_values()};
    }
  } account{stats, in, handler};
  std::istream is(&in);
  bool ok = false;
  try {
    ok = json::sax_parse(is, &handler);
  } catch (const json::exception& e) {
    handler.parse_error(0, "", e);
  }
  if (!ok)  // parse errors, and out_of_range for 2e308
    throw ProfileError(fmt::format("{}: malformed or truncated JSON ({})", source,
                                   base::excerpt(handler.error(), 160)));
  if (!handler.root_object() || !handler.saw_events())
    throw ProfileError(fmt::format(
        "{}: key 'traceEvents': expected a Chrome trace object with a traceEvents array (as "
        "torch.profiler's export_chrome_trace writes)",
        source));
  t.rank = info_int(handler.info(), "rank", 0, source);
  t.world_size = info_int(handler.info(), "world_size", 1, source);
  return t;
}

}  // namespace

RankTrace parse_trace(std::string_view text, const std::string& source,
                      const std::vector<ActionPattern>& patterns, const ReadLimits& limits,
                      ReadStats* stats) {
  detail::TraceInput in(text, source, limits);
  return parse_input(in, source, patterns, limits, stats);
}

RankTrace read_trace(const std::string& path, const std::vector<ActionPattern>& patterns,
                     const ReadLimits& limits, ReadStats* stats) {
  detail::TraceInput in(path, limits);
  return parse_input(in, path, patterns, limits, stats);
}

}  // namespace ppsim::profile
