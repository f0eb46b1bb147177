#include "process_report.hpp"

#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace ppsim::real::detail {

namespace {

// Both ends are the same build on the same kind of machine (one binary under one launcher), so
// plain records travel as their bytes.
class Writer {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void put(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    out_ += s;
  }
  template <typename T>
  void put_all(const std::vector<T>& values) {
    put(static_cast<std::uint64_t>(values.size()));
    for (const auto& v : values) put_one(v);
  }
  std::string take() { return std::move(out_); }

 private:
  template <typename T>
  void put_one(const T& v) {
    put(v);
  }
  void put_one(const schedules::Diagnostic& d) {
    put(d.kind);
    put(d.rank);
    put(d.position);
    put(d.op);
    put(d.message);
    put(d.fatal);
  }
  void put_one(const record::WaitEdge& e) {
    put(e.rank);
    put(e.position);
    put(e.op);
    put(e.peer);
    put(e.waiting_for);
  }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  void get(T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof value);
    std::memcpy(&value, in_.data() + at_, sizeof value);
    at_ += sizeof value;
  }
  void get(std::string& s) {
    std::uint64_t n = 0;
    get(n);
    need(n);
    s.assign(in_.data() + at_, n);
    at_ += n;
  }
  template <typename T>
  void get_all(std::vector<T>& values) {
    std::uint64_t n = 0;
    get(n);
    need(n);  // each element takes at least a byte: a bad count cannot allocate without bound
    values.resize(n);
    for (auto& v : values) get_one(v);
  }
  void done() const {
    if (at_ != in_.size()) throw std::runtime_error("a process report has trailing bytes");
  }

 private:
  void need(std::uint64_t n) const {
    if (n > in_.size() - at_) throw std::runtime_error("a process report is truncated");
  }
  template <typename T>
  void get_one(T& v) {
    get(v);
  }
  void get_one(schedules::Diagnostic& d) {
    get(d.kind);
    get(d.rank);
    get(d.position);
    get(d.op);
    get(d.message);
    get(d.fatal);
  }
  void get_one(record::WaitEdge& e) {
    get(e.rank);
    get(e.position);
    get(e.op);
    get(e.peer);
    get(e.waiting_for);
  }
  std::string_view in_;
  std::size_t at_ = 0;
};

}  // namespace

std::string pack(const ProcessReport& r) {
  Writer w;
  w.put(r.rank);
  w.put(r.timeline);
  w.put_all(r.spans);
  w.put_all(r.transfers);
  w.put_all(r.counters);
  w.put_all(r.diagnostics);
  w.put_all(r.edges);
  w.put(r.real_peak);
  w.put(r.failure);
  return w.take();
}

ProcessReport unpack(std::string_view bytes) {
  Reader in(bytes);
  ProcessReport r;
  in.get(r.rank);
  in.get(r.timeline);
  in.get_all(r.spans);
  in.get_all(r.transfers);
  in.get_all(r.counters);
  in.get_all(r.diagnostics);
  in.get_all(r.edges);
  in.get(r.real_peak);
  in.get(r.failure);
  in.done();
  return r;
}

}  // namespace ppsim::real::detail
