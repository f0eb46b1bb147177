#include "ppsim/config/config.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <optional>
#include <set>
#include <span>

#include "global_batch.hpp"
#include "param_reader.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/config/section.hpp"
#include "ppsim/config/torch_csv_source.hpp"
#include "ppsim/schedules/error.hpp"
#include "ppsim/schedules/generator.hpp"

namespace ppsim::config {

using nlohmann::json;

ConfigError::ConfigError(const std::string& source, const std::string& key,
                         const std::string& message)
    : std::runtime_error(
          key.empty() ? fmt::format("{}: {}", source, message)
                      : fmt::format("{}: key '{}': {}", source, base::excerpt(key, 80), message)),
      source_(source),
      key_(key),
      message_(message) {}

namespace {

// 1-based line and column of the byte at `offset` (0-based) in `text`.
std::string position(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  return fmt::format("{}:{}", line, offset - line_start + 1);
}

// A forward iterator over the text that publishes how far the parser has read, so that the SAX
// handler below knows where the token it is handed ends (nlohmann's events carry no position).
class TrackedIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator() = default;
  TrackedIterator(const char* p, const char** cursor) : p_(p), cursor_(cursor) {}
  reference operator*() const { return *p_; }
  TrackedIterator& operator++() {
    ++p_;
    if (cursor_) *cursor_ = p_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedIterator& o) const { return p_ == o.p_; }
  bool operator!=(const TrackedIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_ = nullptr;
  const char** cursor_ = nullptr;
};

// What went wrong while parsing: where (0-based byte) and why. `syntax`: malformed JSON, as
// opposed to a limit (depth, duplicate key) on well-formed JSON.
struct JsonFailure {
  std::size_t byte = 0;
  std::string key;  // the key path, for a duplicate key
  std::string message;
  bool syntax = false;
};

// Builds the DOM as nlohmann's own SAX DOM parser does, but refuses to open a container deeper
// than `max_depth` and a key an object already has. The iterative parser never recurses, and no
// value deeper than the limit is built, so nothing later (dump, copy, compare) can recurse deeply.
class BoundedDomBuilder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  BoundedDomBuilder(json& root, std::string_view text, const char* const* cursor, int max_depth)
      : root_(root), text_(text), cursor_(cursor), max_depth_(max_depth) {}

  std::optional<JsonFailure> failure;

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(number_integer_t v) { return put(v); }
  bool number_unsigned(number_unsigned_t v) { return put(v); }
  bool number_float(number_float_t v, const string_t&) { return put(v); }
  bool string(string_t& v) { return put(std::move(v)); }
  bool binary(binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    Frame& top = frames_.back();
    if (top.value->contains(k)) {
      // The cursor is just past the closing quote: point at the opening one.
      std::size_t at = offset() >= 2 ? offset() - 2 : 0;
      while (at > 0) {
        if (text_[at] == '"') {
          std::size_t slashes = 0;
          while (at > slashes && text_[at - 1 - slashes] == '\\') ++slashes;
          if (slashes % 2 == 0) break;
        }
        --at;
      }
      const std::string path = path_to(k);
      failure = JsonFailure{at, path,
                            "duplicate key: it is given twice in one object (JSON would keep only "
                            "one of them silently)",
                            false};
      return false;
    }
    top.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& e) {
    // A parse error knows its byte; a number too large for a double (out_of_range) does not:
    // point at the start of its token.
    std::size_t byte = position > token.size() ? position - token.size() + 1 : position;
    if (const auto* pe = dynamic_cast<const json::parse_error*>(&e)) byte = pe->byte;
    std::string what = e.what();
    if (auto p = what.find("] "); what.starts_with("[json.exception.") && p != std::string::npos)
      what = what.substr(p + 2);
    if (auto p = what.find(": "); what.starts_with("parse error") && p != std::string::npos)
      what = what.substr(p + 2);
    // The token may be megabytes of anything: echo a cut, escaped excerpt.
    if (!token.empty())
      if (auto p = what.find(token); p != std::string::npos)
        what.replace(p, token.size(), base::excerpt(token));
    failure = JsonFailure{byte == 0 ? 0 : byte - 1, "", base::excerpt(what, 300), true};
    return false;
  }

 private:
  struct Frame {
    json* value;
    std::string key;  // in an object: the key whose value is being read
  };

  std::size_t offset() const { return static_cast<std::size_t>(*cursor_ - text_.data()); }

  // Where the next value goes: the root, the end of an array, or the key just read.
  json* place(json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& top = frames_.back();
    if (top.value->is_array()) {
      top.value->push_back(std::move(v));
      return &top.value->back();
    }
    json& slot = (*top.value)[top.key];
    slot = std::move(v);
    return &slot;
  }
  bool put(json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(json&& container) {
    if (static_cast<int>(frames_.size()) >= max_depth_) {
      failure = JsonFailure{
          offset() > 0 ? offset() - 1 : 0, "",
          fmt::format("nested deeper than {} levels of objects and arrays (a config needs about 5)",
                      max_depth_),
          false};
      return false;
    }
    frames_.push_back({place(std::move(container)), ""});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
  // "schedule.ranks", "a.list[2].b": the keys and array indices down to `k` in the innermost
  // object.
  std::string path_to(const std::string& k) const {
    std::string path;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
      if (frames_[i].value->is_array())
        path += fmt::format("[{}]", frames_[i].value->size() - 1);
      else
        path += (path.empty() ? "" : ".") + frames_[i].key;
    }
    return path + (path.empty() ? "" : ".") + k;
  }

  json& root_;
  std::string_view text_;
  const char* const* cursor_;
  int max_depth_;
  std::vector<Frame> frames_;
};

// Parses `text` under the limits; on failure returns what went wrong instead of a value.
std::optional<JsonFailure> parse_bounded(std::string_view text, int max_depth, json& out) {
  const char* cursor = text.data();
  BoundedDomBuilder builder(out, text, &cursor, max_depth);
  const TrackedIterator first(text.data(), &cursor), last(text.data() + text.size(), nullptr);
  const bool ok = json::sax_parse(first, last, &builder);
  if (ok) return std::nullopt;
  if (!builder.failure) return JsonFailure{0, "", "malformed JSON", true};
  out = nullptr;
  return builder.failure;
}

}  // namespace

json parse_json_text(const std::string& text, const std::string& source) {
  json out;
  if (auto f = parse_bounded(text, kMaxJsonDepth, out))
    throw ConfigError(fmt::format("{}:{}", source, position(text, f->byte)), f->key,
                      f->syntax ? fmt::format("malformed JSON: {}", f->message) : f->message);
  return out;
}

std::string read_config_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO that no process writes to would wait forever; reads block again
  // below, so a pipe with a writer (`<(cmd)`) is read to its end.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw ConfigError(path, "", fmt::format("cannot open file: {}", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  struct stat st {};
  const bool fifo = ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
  if (!fifo && S_ISDIR(st.st_mode))
    throw ConfigError(path, "", "is a directory, not a config file");
  // Read at most one byte more than the limit, whatever the file claims to be (/dev/zero, a pipe).
  std::string text;
  std::size_t size = 0;
  // Chunks of about the file's size: a 64 KiB chunk cost 16 fresh pages for a 1 KiB config.
  const std::size_t chunk =
      fifo || st.st_size <= 0
          ? std::size_t{1} << 16
          : std::clamp<std::size_t>(static_cast<std::size_t>(st.st_size) + 1, 4096, 1 << 16);
  while (size <= kMaxConfigBytes) {
    if (text.size() == size)  // full: one more chunk (a short read left room for the next)
      text.resize(size + std::min<std::size_t>(chunk, kMaxConfigBytes + 1 - size));
    const ssize_t got = ::read(fd, text.data() + size, text.size() - size);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw ConfigError(path, "", fmt::format("cannot read file: {}", std::strerror(errno)));
    }
    if (got == 0) break;
    size += static_cast<std::size_t>(got);
  }
  if (size > kMaxConfigBytes)
    throw ConfigError(
        path, "",
        fmt::format("larger than {} MiB, the most a config file may be", kMaxConfigBytes >> 20));
  if (size == 0 && fifo)
    throw ConfigError(path, "", "is a FIFO that no process wrote to: expected a config file");
  text.resize(size);
  return text;
}

std::string apply_override(json& config, const std::string& assignment) {
  const std::string source = fmt::format("--set {}", base::excerpt(assignment, 80));
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(source, "", "expected KEY=VALUE, e.g. comm.style=blocking");
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (parts.back().empty()) throw ConfigError(source, path, "empty key component");
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  // The key path opens one object per component; the value gets the rest of the depth.
  if (static_cast<int>(parts.size()) >= kMaxJsonDepth)
    throw ConfigError(source, path,
                      fmt::format("a key path of at most {} components", kMaxJsonDepth - 1));
  json value;
  if (auto f = parse_bounded(text, kMaxJsonDepth - static_cast<int>(parts.size()), value)) {
    // Not JSON (or a number out of range): take it as text. A limit on valid JSON is an error.
    if (f->syntax) {
      value = text;
      try {  // every string must print as JSON again (reports, traces): valid UTF-8 only
        (void)value.dump();
      } catch (const json::type_error&) {
        throw ConfigError(
            source, path,
            fmt::format("the value '{}' is not valid UTF-8", base::excerpt(text, 60)));
      }
    } else
      throw ConfigError(
          source, f->key.empty() ? path : path + "." + f->key,
          fmt::format("{} (in the value, column {})",
                      f->key.empty() ? "value " + f->message : f->message, f->byte + 1));
  }
  json* node = &config;
  for (const auto& part : parts) {
    // null: a section the config does not have yet, e.g. --set comm.style=blocking without "comm".
    if (!node->is_object() && !node->is_null())
      throw ConfigError(source, path, "cannot set a key inside a non-object value");
    node = &(*node)[part];
  }
  *node = std::move(value);
  return path;
}

namespace {

// comm.semantics and the keys that belong to one model only; each key of the other model is an
// error, so that a setting is never silently ignored.
void read_semantics(Reader& r, Config& c) {
  NetworkOptions& n = c.network;
  const bool nccl = r.one_of("semantics", c.program->nccl_by_default() ? "nccl" : "mpi",
                             {"mpi", "nccl"}) == "nccl";
  n.semantics = nccl ? P2pSemantics::nccl : P2pSemantics::mpi;
  const char* other = nccl ? "mpi" : "nccl";
  // Named arrays: an initializer_list chosen by ?: would dangle before the loop reads it.
  static constexpr std::array<const char*, 1> kMpiOnly = {"eager_limit"};
  static constexpr std::array<const char*, 3> kNcclOnly = {"nccl_buffer_bytes", "nccl_streams",
                                                           "nccl_max_group_ops"};
  for (const char* key :
       nccl ? std::span<const char* const>(kMpiOnly) : std::span<const char* const>(kNcclOnly))
    if (r.has(key))
      r.fail(key, fmt::format("only used under comm.semantics \"{}\" (this config runs under "
                              "\"{}\"){}",
                              other, nccl ? "nccl" : "mpi",
                              nccl ? "; NCCL's counterpart is comm.nccl_buffer_bytes" : ""));
  if (nccl) {
    if (r.has("matching") && r.string("matching", "fifo") != "fifo")
      r.fail("matching",
             "NCCL has no tags: under comm.semantics \"nccl\" the k-th send from A "
             "to B meets the k-th receive at B from A, so matching is \"fifo\" (or "
             "leave it out)");
    r.get("matching");
    n.matching = Matching::fifo;
    n.nccl_buffer_bytes = r.bytes("nccl_buffer_bytes", 0);
    n.nccl_streams = r.one_of("nccl_streams", "communicator", {"communicator", "peer"}) == "peer"
                         ? NcclStreams::peer
                         : NcclStreams::communicator;
    n.nccl_max_group_ops = r.integer("nccl_max_group_ops", 0, 0);
  } else {
    n.eager_limit = r.bytes("eager_limit", 0);
    n.matching =
        r.one_of("matching", "tag", {"tag", "fifo"}) == "tag" ? Matching::tag : Matching::fifo;
  }
}

CostSpec read_costs(Reader& r) {
  CostSpec c;
  c.forward = r.opt_number("forward");
  c.backward = r.opt_number("backward");
  c.backward_input = r.opt_number("backward_input");
  c.backward_weight = r.opt_number("backward_weight");
  // An overlapped F&B pair's duration: a time, or {"fraction": x} of its F + B.
  if (const json* o = r.get("overlapped_fb")) {
    const char* expected =
        "expected a time >= 0 or {\"fraction\": x} with 0 < x <= 1 (of the pair's F + B)";
    if (o->is_number()) {
      c.overlapped_fb = r.number("overlapped_fb", 0);
    } else if (o->is_object()) {
      Reader f(*o, r.source(), r.key("overlapped_fb."));
      const json* x = f.get("fraction");
      f.reject_unknown();  // {"percent": 80} is named as the unknown key it is
      if (!x) r.fail("overlapped_fb", fmt::format("{}, got {}", expected, Reader::describe(*o)));
      if (!x->is_number() || !(x->get<double>() > 0 && x->get<double>() <= 1))
        f.fail("fraction",
               fmt::format("expected a number with 0 < x <= 1, got {}", Reader::describe(*x)));
      c.overlapped_fb_fraction = x->get<double>();
    } else {
      r.fail("overlapped_fb", fmt::format("{}, got {}", expected, Reader::describe(*o)));
    }
  }
  return c;
}

// A per_stage key: a stage number written one way only ("3", not "03", "+3", " 3" or "3.0"), so
// that two keys cannot name the same stage.
std::optional<int> stage_key(const std::string& k) {
  if (k.empty() || k.size() > 9 || (k.size() > 1 && k[0] == '0')) return std::nullopt;
  int stage = 0;
  for (char ch : k) {
    if (ch < '0' || ch > '9') return std::nullopt;
    stage = stage * 10 + (ch - '0');
  }
  return stage;
}

void parse_into(Config& c, const json& j, const std::string& source) {
  Reader top(j, source, "");
  c.name = top.string("name", std::filesystem::path(source).stem().string());
  c.time_unit = top.one_of("time_unit", "ms", {"s", "ms", "us", "ns"});

  const json* sched = top.get("schedule");
  if (!sched) top.missing("schedule", "expected an object with at least kind, ranks, microbatches");
  {
    Reader s(*sched, source, "schedule.");
    c.kind = s.string("kind", "", true);
    const ProgramSource* src = source_for_kind(c.kind);
    if (!src) {
      std::vector<std::string> names = schedules::Registry::instance().names();
      for (const auto& one : SourceRegistry::instance().all())
        if (one.name != "generated") names.push_back(one.name);
      s.fail("kind", fmt::format("unknown schedule \"{}\"; expected one of {}",
                                 base::excerpt(c.kind), fmt::join(names, ", ")));
    }
    c.program = src->read(s, c.kind);
  }
  if (const json* costs = top.get("costs")) {
    Reader r(*costs, source, "costs.");
    c.costs = read_costs(r);
    c.launch_overhead = r.number("launch_overhead", 0);
    c.start_offset = r.number("start_offset", 0);
    if (const json* per = r.get("per_stage")) {
      Reader ps(*per, source, "costs.per_stage.");
      for (auto it = per->begin(); it != per->end(); ++it) {
        const std::optional<int> stage = stage_key(it.key());
        if (!stage)
          ps.fail(it.key(),
                  "expected a stage number as key, written without sign, leading zeros, spaces "
                  "or decimals, e.g. \"3\": {\"forward\": 1.5}");
        Reader one(it.value(), source, fmt::format("costs.per_stage.{}.", it.key()));
        c.stage_costs[*stage] = read_costs(one);
        one.reject_unknown();
        ps.get(it.key());
      }
    }
    r.reject_unknown();
  }

  if (const json* comm = top.get("comm")) {
    Reader r(*comm, source, "comm.");
    const auto& styles = schedules::LoweringRegistry::instance();
    // A source that is not lowered (custom op lists write their comm ops out) takes no style.
    const bool lowered = c.program->comm_style(c.lowering) == c.lowering.style;
    if (!lowered && r.has("style"))
      r.fail("style", fmt::format("not used by schedule '{}': its op lists write the "
                                  "communication out",
                                  c.kind));
    c.default_comm = !r.has("style");
    c.lowering.style = r.one_of("style", c.program->default_comm().style, styles.names());
    c.network.latency = r.number("latency", 0);
    c.network.bandwidth = r.number("bandwidth", 0);
    c.network.boundary_bytes = r.bytes("boundary_bytes", 0);
    read_semantics(r, c);
    // The chosen style's own parameters, as it declares them.
    if (lowered)
      read_params(r, styles.find(c.lowering.style)->params, c.lowering.style, c.lowering.params);
    r.reject_unknown([&](const std::string& key) -> std::string {
      std::vector<std::string> users;
      for (const auto& st : styles.all())
        if (schedules::find_param(st.params, key)) users.push_back(st.name);
      if (users.empty()) return "";
      if (!lowered)
        return fmt::format(
            "not used by schedule '{}': its op lists write the communication out "
            "(a parameter of comm style {})",
            c.kind, fmt::join(users, ", "));
      return not_a_parameter_of("comm style", c.lowering.style, users);
    });
  }
  const schedules::LoweringOptions default_comm = c.program->default_comm();
  if (!top.has("comm")) c.lowering.style = default_comm.style;
  if (c.default_comm)  // the schedule's parameters for its style, where the config gives none
    for (const auto& [key, value] : default_comm.params.values())
      if (!c.lowering.params.has(key)) c.lowering.params.set(key, value);
  if (!top.has("comm") && c.program->nccl_by_default()) {  // PyTorch's runs are NCCL's
    c.network.semantics = P2pSemantics::nccl;
    c.network.matching = Matching::fifo;
  }
  c.lowering.groups = c.network.semantics == P2pSemantics::nccl;
  // Defaults of the style's parameters, so reports and sweeps see the values in force.
  c.lowering.params =
      schedules::resolve(schedules::LoweringRegistry::instance().find(c.lowering.style)->params,
                         c.lowering.params, c.lowering.style);

  if (const json* mem = top.get("memory")) {
    Reader r(*mem, source, "memory.");
    c.memory.activation_bytes = r.bytes("activation_bytes", 0);
    c.memory.weight_stash_bytes = r.bytes("weight_stash_bytes", 0);
    c.memory.static_bytes = r.bytes("static_bytes", 0);
    c.memory.deallocate_outputs = r.boolean("deallocate_outputs", false);
    if (c.memory.weight_stash_bytes > c.memory.activation_bytes)
      r.fail("weight_stash_bytes",
             fmt::format("must not exceed activation_bytes ({}), got {}", c.memory.activation_bytes,
                         c.memory.weight_stash_bytes));
    r.reject_unknown();
  }
  // The network and its GPUs; the cuda compute reads the same `model` (real/mlp_model.hpp).
  if (const json* hw = top.get("hardware")) {
    Reader r(*hw, source, "hardware.");
    c.hardware = read_hardware_section(r);
    if (!top.has("model"))
      top.fail("hardware", "needs a model section describing the network (docs/MODEL.md)");
  }
  if (const json* m = top.get("model")) {
    Reader r(*m, source, "model.");
    c.model_section = read_model_section(r, c.hardware.has_value());
    c.sections["model"] = *m;
  }
  for (const auto& section : SectionRegistry::instance().all()) {
    if (const json* v = top.get(section.name)) {
      Reader r(*v, source, section.name + ".");
      section.check(r);
      c.sections[section.name] = *v;
    }
  }
  top.reject_unknown();
}

}  // namespace

std::string Config::source_of(const std::string& key) const {
  auto under = [](const std::string& k, const std::string& path) {
    return k == path || (k.size() > path.size() && k.starts_with(path) &&
                         (k[path.size()] == '.' || k[path.size()] == '['));
  };
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
    if (under(key, it->first) || under(it->first, key)) return it->second;
  return source;
}

Config parse_config(const json& j_given, const std::string& source,
                    const std::vector<std::string>& overrides) {
  Config c;
  c.source = source;
  c.raw = j_given;
  for (const auto& o : overrides)
    c.overrides.emplace_back(o.substr(0, o.find('=')),
                             fmt::format("--set {}", base::excerpt(o, 80)));
  try {
    c.raw = with_global_batch(j_given, source);
    parse_into(c, c.raw, source);
  } catch (const ConfigError& e) {
    // A bad value that came from --set is blamed on the flag, not on the file.
    if (e.source() == source && !e.key().empty()) {
      const std::string blame = c.source_of(e.key());
      if (blame != source) throw ConfigError(blame, e.key(), e.message());
    }
    throw;
  }
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  // A PyTorch schedule CSV stands for a config that reads it (docs/INTEROP.md).
  json j = is_torch_csv_path(path) ? torch_csv_config(path)
                                   : parse_json_text(read_config_file(path), path);
  for (const auto& o : overrides) apply_override(j, o);
  return parse_config(j, path, overrides);
}

double microseconds_per_unit(const std::string& unit) {
  if (unit == "s") return 1e6;
  if (unit == "ms") return 1e3;
  if (unit == "us") return 1.0;
  return 1e-3;  // ns
}

}  // namespace ppsim::config
