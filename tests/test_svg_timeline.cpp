// SVG timeline writer (viz/svg_timeline.hpp), read back with libxml2: the document is well-formed
// XML, there is one box per compute op, x = x0 + start * scale and width = duration * scale, fills
// are the palette's colour of the op's kind and chunk, names are escaped, a deadlocked run shows
// its stuck ops and cycle, and a 32 x 256 run stays small by merging sub-pixel boxes.
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "paths.hpp"
#include "ppsim/config/config.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/palette.hpp"
#include "ppsim/viz/svg_timeline.hpp"

namespace {

using namespace ppsim;
using nlohmann::json;

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // text content, children included
  std::string attr(const std::string& key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? std::string() : it->second;
  }
  double num(const std::string& key) const { return std::stod(attrs.at(key)); }
  bool has_class(const std::string& c) const {
    const std::string cls = " " + attr("class") + " ";
    return cls.find(" " + c + " ") != std::string::npos;
  }
};

struct Svg {
  std::vector<Element> elements;  // document order
  std::string raw;
  const Element& root() const { return elements.front(); }
  std::vector<const Element*> all(const std::string& name, const std::string& cls = "") const {
    std::vector<const Element*> out;
    for (const auto& e : elements)
      if (e.name == name && (cls.empty() || e.has_class(cls))) out.push_back(&e);
    return out;
  }
};

void collect(xmlNode* node, std::vector<Element>& out) {
  for (xmlNode* n = node; n; n = n->next) {
    if (n->type != XML_ELEMENT_NODE) continue;
    Element e;
    e.name = reinterpret_cast<const char*>(n->name);
    for (xmlAttr* a = n->properties; a; a = a->next) {
      xmlChar* v = xmlNodeListGetString(n->doc, a->children, 1);
      e.attrs[reinterpret_cast<const char*>(a->name)] = v ? reinterpret_cast<const char*>(v) : "";
      xmlFree(v);
    }
    xmlChar* t = xmlNodeGetContent(n);
    e.text = t ? reinterpret_cast<const char*>(t) : "";
    xmlFree(t);
    out.push_back(std::move(e));
    collect(n->children, out);
  }
}

// Parses strictly (no network, no recovery): an ill-formed document fails the test.
Svg parse(const std::string& text) {
  std::unique_ptr<xmlDoc, void (*)(xmlDoc*)> doc(
      xmlReadMemory(text.data(), static_cast<int>(text.size()), "timeline.svg", "UTF-8",
                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
      xmlFreeDoc);
  INFO(text.substr(0, 2000));
  REQUIRE(doc != nullptr);
  Svg svg;
  svg.raw = text;
  collect(xmlDocGetRootElement(doc.get()), svg.elements);
  REQUIRE(!svg.elements.empty());
  REQUIRE(svg.root().name == "svg");
  return svg;
}

std::string draw(const record::RunRecord& rec, const viz::TimelineOptions& options = {},
                 bool fragment = false) {
  std::ostringstream out;
  viz::write_svg_timeline(out, rec, options, fragment);
  return out.str();
}

json base_config(const std::string& name, const std::string& kind, int P, int M, int V,
                 const std::string& style) {
  json comm = {{"style", style}, {"latency", 0.05}, {"boundary_bytes", 4096}};
  if (style == "blocking") comm["eager_limit"] = 0;
  return {
      {"name", name},
      {"schedule", {{"kind", kind}, {"ranks", P}, {"microbatches", M}, {"chunks", V}}},
      {"costs", {{"forward", 1.0}, {"backward", 2.0}, {"per_stage", {{"1", {{"forward", 1.5}}}}}}},
      {"comm", comm},
      {"memory", {{"activation_bytes", 1 << 20}, {"static_bytes", 1 << 30}}}};
}

record::RunRecord simulate(const json& j) {
  return sim::analyze(config::parse_config(j, "svg-test.json"), {.trace = true});
}

record::RunRecord simulate(const std::string& kind, int P, int M, int V = 1,
                           const std::string& style = "async") {
  return simulate(base_config("svg test", kind, P, M, V, style));
}

std::size_t compute_spans(const record::Trace& t) {
  std::size_t n = 0;
  for (const auto& s : t.spans) n += s.kind == record::SpanKind::compute ? 1 : 0;
  return n;
}

const record::Span& span_at(const record::Trace& t, int rank, int pos) {
  for (const auto& s : t.spans)
    if (s.rank == rank && s.pos == pos && s.kind == record::SpanKind::compute) return s;
  FAIL("no compute span at rank " << rank << " pos " << pos);
  throw 0;
}

int rec_microbatch(const record::RunRecord& rec, int rank, int pos) {
  return rec.program->ops(rank)[static_cast<std::size_t>(pos)].microbatch;
}

}  // namespace

TEST_CASE("svg_timeline.well_formed_box_per_compute", "[svg]") {
  // svg timeline: well-formed, one box per compute op, one row per rank
  for (const std::string kind : {"gpipe", "1f1b"}) {
    const auto rec = simulate(kind, 4, 8);
    const Svg svg = parse(draw(rec));
    CHECK(svg.raw.starts_with("<?xml"));
    CHECK(svg.raw.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
    // 4 x 8 at 1200 px: every box is wide enough to stand alone.
    CHECK(svg.all("rect", "op").size() == compute_spans(*rec.trace));
    CHECK(svg.all("rect", "op").size() == 4u * 8u * 2u);  // one F and one B per stage and mb
    CHECK(svg.all("rect", "merged").empty());
    CHECK(svg.all("g", "rank").size() == 4);
    CHECK(svg.all("text", "rank-label").size() == 4);
    // Async 1F1B moves 2 (P-1) M messages; each is one line.
    CHECK(svg.all("line", "transfer").size() == rec.trace->transfers.size());
    CHECK(rec.trace->transfers.size() == 2u * 3u * 8u);
    // Microbatch numbers: each box carries its own (all fit at this size).
    CHECK(svg.all("g", "mb-labels").size() == 1);
  }
}

TEST_CASE("svg_timeline.x_x0_start_scale_width", "[svg]") {
  // svg timeline: x = x0 + start * scale and width = duration * scale
  const auto rec = simulate("1f1b", 4, 8);
  const double makespan = rec.metrics->makespan;
  for (const double time_end : {-1.0, 2 * makespan}) {
    const viz::TimelineOptions options{
        .time_end = time_end, .width = 1000, .interactive = true, .id_prefix = ""};
    const Svg svg = parse(draw(rec, options));
    const double x0 = svg.root().num("data-x0"), scale = svg.root().num("data-px-per-unit");
    // The plot spans the drawing minus its margins: twice the time end, half the scale.
    const double t_end = time_end > 0 ? time_end : makespan;
    CHECK(svg.root().num("data-time-end") == Approx(t_end).epsilon(1e-5));
    CHECK(scale * t_end == Approx(1000 - x0 - 16).epsilon(1e-5));
    const auto boxes = svg.all("rect", "op");
    REQUIRE(boxes.size() == compute_spans(*rec.trace));
    std::set<std::pair<int, int>> seen;
    for (const auto* b : boxes) {
      const int rank = std::stoi(b->attr("data-rank")), pos = std::stoi(b->attr("data-pos"));
      seen.insert({rank, pos});
      const auto& s = span_at(*rec.trace, rank, pos);
      // Printed with 2 decimals.
      CHECK(b->num("x") == Approx(x0 + s.start * scale).margin(0.0051));
      CHECK(b->num("width") == Approx((s.end - s.start) * scale).margin(0.0051));
      CHECK(b->num("data-start") == Approx(s.start).epsilon(1e-5));
      CHECK(b->num("data-end") == Approx(s.end).epsilon(1e-5));
      CHECK(b->attr("data-op") ==
            rec.program->op_text(rank, rec.program->ops(rank)[static_cast<std::size_t>(pos)]));
    }
    CHECK(seen.size() == boxes.size());  // each op drawn once
  }
}

TEST_CASE("svg_timeline.fills_palette_colour_kind_chunks", "[svg]") {
  // svg timeline: fills are the palette colour of the kind, chunks as shades
  // Interleaved 1F1B, V = 2: F and B of chunk 0 and chunk 1 are four different fills.
  const auto rec = simulate("interleaved-1f1b", 4, 8, 2);
  const Svg svg = parse(draw(rec, {.interactive = true, .id_prefix = ""}));
  std::set<std::string> fills;
  for (const auto* b : svg.all("rect", "op")) {
    const int rank = std::stoi(b->attr("data-rank")), pos = std::stoi(b->attr("data-pos"));
    const auto& op = rec.program->ops(rank)[static_cast<std::size_t>(pos)];
    const int chunk = rec.program->place(op.stage).chunk;
    CHECK(b->attr("fill") == viz::kind_color(op.kind, chunk, 2));
    fills.insert(b->attr("fill"));
  }
  CHECK(fills.size() == 4);
  CHECK(viz::kind_color(schedules::OpKind::F) != viz::kind_color(schedules::OpKind::B));
  CHECK(viz::kind_color(schedules::OpKind::F, 1, 2) != viz::kind_color(schedules::OpKind::F));

  // Split backward: I and W get their own colours.
  json j = base_config("split", "1f1b", 4, 4, 1, "async");
  j["costs"] = {{"forward", 1.0}, {"backward_input", 1.0}, {"backward_weight", 1.0}};
  const auto split = simulate(j);
  std::set<schedules::OpKind> kinds;
  for (int r = 0; r < split.program->ranks(); ++r)
    for (const auto& op : split.program->ops(r))
      if (schedules::is_compute(op.kind)) kinds.insert(op.kind);
  const Svg s2 = parse(draw(split));
  std::set<std::string> want;
  for (auto k : kinds) want.insert(viz::kind_color(k));
  std::set<std::string> got;
  for (const auto* b : s2.all("rect", "op")) got.insert(b->attr("fill"));
  CHECK(got == want);
}

TEST_CASE("svg_timeline.names_escaped_origin_labelled", "[svg]") {
  // svg timeline: names with <&"> are escaped, the origin is labelled
  auto rec = simulate(base_config("a <b> & \"c\" 'd'", "1f1b", 2, 2, 1, "async"));
  for (const std::string origin : {"simulated", "measured"}) {
    rec.trace->origin = origin;
    rec.info.origin = origin;
    const Svg svg = parse(draw(rec, {.interactive = true, .id_prefix = "p<&\">"}));
    const auto titles = svg.all("text", "title");
    REQUIRE(titles.size() == 1);
    CHECK(titles[0]->text.find("a <b> & \"c\" 'd'") != std::string::npos);
    CHECK(titles[0]->text.find(origin) != std::string::npos);
    CHECK(svg.root().attr("data-origin") == origin);
    CHECK(svg.root().attr("id") == "p<&\">timeline");
    CHECK(svg.raw.find("<b>") == std::string::npos);
  }
}

TEST_CASE("svg_timeline.control_characters_name_leave_xml", "[svg]") {
  // svg timeline: control characters in a name leave the XML well-formed
  // Control characters and bytes that are not UTF-8 (here a lone 0xff) become U+FFFD, as in the
  // JUnit report (base/escape.hpp): the document stays well-formed UTF-8.
  const auto rec = simulate(base_config("bell\x07 tab\t esc\x1b \xff", "gpipe", 2, 2, 1, "async"));
  const Svg svg = parse(draw(rec));
  CHECK(svg.all("text", "title")[0]->text.starts_with(
      "bell\xEF\xBF\xBD tab\t esc\xEF\xBF\xBD \xEF\xBF\xBD"));
}

TEST_CASE("svg_timeline.fragment_html_unique_ids_per", "[svg]") {
  // svg timeline: fragment for HTML, unique ids per prefix, no trace is an error
  const auto rec = simulate("gpipe", 2, 2);
  const std::string a = draw(rec, {.id_prefix = "t1-"}, true);
  CHECK(a.starts_with("<svg "));
  CHECK(a.find("<?xml") == std::string::npos);
  const Svg svg = parse(a);
  CHECK(svg.root().attr("id") == "t1-timeline");
  for (const auto& e : svg.elements)
    if (!e.attr("id").empty()) CHECK(e.attr("id").starts_with("t1-"));

  record::RunRecord bare = rec;
  bare.trace.reset();
  std::ostringstream out;
  CHECK_THROWS_AS(viz::write_svg_timeline(out, bare), std::invalid_argument);
}

TEST_CASE("svg_timeline.hover_says_what_op_waited", "[svg]") {
  // svg timeline: hover says what the op waited for
  // Blocking 1F1B with eager sends: rank 1's first forward waits in RECV_F for rank 0's F.
  json j = base_config("wait", "1f1b", 2, 2, 1, "blocking");
  j["comm"]["eager_limit"] = 1 << 20;
  const auto rec = simulate(j);
  const Svg svg = parse(draw(rec, {.interactive = true, .id_prefix = ""}));
  bool found = false;
  for (const auto* b : svg.all("rect", "op"))
    if (b->attr("data-rank") == "1" && b->attr("data-op") == "1F0") {
      found = true;
      CHECK(b->attr("data-wait").starts_with("1RECV_F0 0"));
      CHECK(b->attr("data-wait").ends_with("(from rank 0)"));
      CHECK(b->text.find("waited for: 1RECV_F0") != std::string::npos);
    }
  CHECK(found);
}

TEST_CASE("svg_timeline.deadlocked_run_shows_stuck_ops", "[svg]") {
  // svg timeline: a deadlocked run shows the stuck ops and the cycle
  const auto rec = simulate("1f1b", 4, 8, 1, "blocking");
  REQUIRE(rec.deadlock);
  REQUIRE(!rec.deadlock->cycles.empty());
  const Svg svg = parse(draw(rec));
  std::size_t unfinished = 0;
  for (const auto& r : rec.trace->ranks) unfinished += r.finished ? 0 : 1;
  const auto stuck = svg.all("rect", "stuck");
  CHECK(stuck.size() == unfinished);
  std::set<std::pair<int, int>> in_cycle;
  for (const auto& c : rec.deadlock->cycles)
    for (const auto& b : c) in_cycle.insert({b.rank, b.position});
  std::size_t cycle_marks = 0;
  for (const auto* s : stuck) {
    const int rank = std::stoi(s->attr("data-rank")), pos = std::stoi(s->attr("data-pos"));
    CHECK(pos == rec.trace->ranks[static_cast<std::size_t>(rank)].stuck_pos);
    CHECK(s->has_class("cycle") == (in_cycle.count({rank, pos}) > 0));
    cycle_marks += s->has_class("cycle") ? 1 : 0;
  }
  CHECK(cycle_marks == in_cycle.size());
  // The cycle in words, as the report has it.
  std::string words;
  for (const auto* t : svg.all("g", "deadlock")) words += t->text;
  CHECK(words.find("Deadlock cycle 1: rank 2 blocked in 2SEND_F1") != std::string::npos);
  // Boxes only up to the hang: nothing past the last recorded time.
  const double x0 = svg.root().num("data-x0"), scale = svg.root().num("data-px-per-unit");
  double t_max = 0;
  for (const auto& s : rec.trace->spans) t_max = std::max(t_max, s.end);
  for (const auto* b : svg.all("rect", "op"))
    CHECK(b->num("x") + b->num("width") <= x0 + t_max * scale + 0.01);
  CHECK(svg.all("rect", "op").size() == compute_spans(*rec.trace));
}

TEST_CASE("svg_timeline.long_cycle_wraps_drawing_s", "[svg]") {
  // svg timeline: a long cycle wraps to the drawing's width, every op still named
  // A 4-rank ring under nccl: each edge also names the kernel its op is queued behind.
  const auto rec = sim::analyze(
      config::load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/hangs/paddlefleet-2080.json"),
      {.trace = true});
  REQUIRE(rec.deadlock);
  const std::string cycle = rec.deadlock->describe();
  REQUIRE(cycle.size() > 400);
  const Svg svg = parse(draw(rec, {.width = 800, .interactive = false, .id_prefix = ""}));
  // The title says which point-to-point model ran.
  CHECK(svg.all("text", "title").at(0)->text.find("custom (custom, nccl)") != std::string::npos);
  std::string words;
  std::size_t lines = 0;
  // The deadlock group's lines follow it in document order.
  bool in_group = false;
  for (const auto& e : svg.elements) {
    if (e.name == "g") in_group = e.has_class("deadlock");
    if (!in_group || e.name != "text") continue;
    ++lines;
    CHECK(e.text.size() <= 800 / 6 + 8);  // bytes: about what fits at 6.2 px a character
    words += e.text + " ";
  }
  CHECK(lines >= 4);
  for (const auto& b : rec.deadlock->cycles.at(0)) {
    CHECK(words.find(b.op) != std::string::npos);
    CHECK(words.find(b.waiting_for.substr(0, b.waiting_for.find(' '))) != std::string::npos);
  }
}

TEST_CASE("svg_timeline.32_ranks_x_256_microbatches", "[svg][scale]") {
  // svg timeline: 32 ranks x 256 microbatches merge into a small file
  const auto rec = simulate("1f1b", 32, 256);
  const std::string text = draw(rec);
  CHECK(text.size() < 2'000'000);
  const Svg svg = parse(text);
  // Every compute op is in exactly one box or one merged run.
  std::size_t covered = svg.all("rect", "op").size();
  for (const auto* m : svg.all("rect", "merged")) covered += std::stoul(m->attr("data-n"));
  CHECK(covered == compute_spans(*rec.trace));
  CHECK(svg.all("g", "rank").size() == 32);
  // Too many transfers to draw: left out, and the legend says so.
  CHECK(svg.all("line", "transfer").empty());
  CHECK(svg.raw.find("transfers not drawn") != std::string::npos);
  // The shape stays: each row's marks start at the rank's first op and end at its last.
  const double x0 = svg.root().num("data-x0"), scale = svg.root().num("data-px-per-unit");
  std::map<int, std::pair<double, double>> extent;  // rank -> first x, last x + width
  int rank = -1;
  for (const auto& e : svg.elements) {
    if (e.name == "g" && e.has_class("rank")) rank = std::stoi(e.attr("data-rank"));
    if (e.name == "rect" && (e.has_class("op") || e.has_class("merged")) && rank >= 0) {
      auto [it, fresh] = extent.try_emplace(rank, e.num("x"), e.num("x") + e.num("width"));
      if (!fresh) it->second.second = std::max(it->second.second, e.num("x") + e.num("width"));
    }
  }
  REQUIRE(extent.size() == 32);
  for (const auto& [r, ext] : extent) {
    double first = 1e300, last = 0;
    for (const auto& s : rec.trace->spans)
      if (s.rank == r && s.kind == record::SpanKind::compute) {
        first = std::min(first, s.start);
        last = std::max(last, s.end);
      }
    CHECK(ext.first == Approx(x0 + first * scale).margin(0.01));
    CHECK(ext.second == Approx(x0 + last * scale).margin(0.6));  // a merged run may be 0.5 px
  }
}

TEST_CASE("svg_timeline.sub_pixel_boxes_merge_into", "[svg]") {
  // svg timeline: sub-pixel boxes merge into runs that cover every op once
  // 8 x 256 GPipe at 320 px: a forward is about 0.3 px wide, so the rows are merged runs.
  const auto rec = simulate("gpipe", 8, 256);
  const Svg wide = parse(draw(rec, {.width = 8000, .interactive = false, .id_prefix = ""}));
  const Svg narrow = parse(draw(rec, {.width = 320, .interactive = false, .id_prefix = ""}));
  CHECK(wide.all("rect", "merged").empty());
  CHECK(wide.all("rect", "op").size() == compute_spans(*rec.trace));
  const auto merged = narrow.all("rect", "merged");
  REQUIRE(!merged.empty());
  std::size_t covered = narrow.all("rect", "op").size();
  for (const auto* m : merged) {
    CHECK(std::stoul(m->attr("data-n")) >= 2);
    covered += std::stoul(m->attr("data-n"));
  }
  CHECK(covered == compute_spans(*rec.trace));
  CHECK(narrow.all("rect", "op").size() + merged.size() < compute_spans(*rec.trace) / 4);
  // A run's colour is its dominant kind: GPipe's rows are one run of F, then one of B (the
  // backward is twice as long, so the middle run, if the two touch, is green).
  std::set<std::string> fills;
  for (const auto* m : merged) fills.insert(m->attr("fill"));
  CHECK(fills.count(viz::kind_color(schedules::OpKind::B)) == 1);
}

TEST_CASE("svg_timeline.overlapped_f_b_own_colour", "[svg]") {
  // svg timeline: overlapped F&B in its own colour, the second route hatched
  // One rank: F1 and B0 run together as one composite op, labelled with both microbatches.
  const auto overlap =
      simulate(json{{"name", "overlap"},
                    {"schedule", {{"kind", "custom"}, {"ops", {"0F0,(0F1;0B0)OVERLAP_F_B,0B1"}}}}});
  REQUIRE(overlap.ok());
  const Svg a = parse(draw(overlap));
  const auto boxes = a.all("rect", "op");
  REQUIRE(boxes.size() == 3);
  CHECK(boxes[1]->attr("fill") == viz::kind_color(schedules::OpKind::OVERLAP_F_B));
  bool label = false;
  for (const auto* t : a.all("text")) label = label || t->text == "1/0";
  CHECK(label);
  CHECK(a.raw.find("F&amp;B overlapped") != std::string::npos);  // in the legend

  // Two routes in opposite directions over two ranks (DualPipe's layout): microbatch 0 runs
  // 0 -> 1 on stages 0, 1; microbatch 1 runs 1 -> 0 on stages 2, 3. Its boxes are hatched.
  const auto dual =
      simulate(json{{"name", "two routes"},
                    {"schedule",
                     {{"kind", "custom"},
                      {"ops",
                       {"0F0,0SEND_F0#0,3RECV_F1,3F1,3B1,3SEND_B1#1,0RECV_B0,WAIT(0;1),0B0",
                        "2F1,2SEND_F1#0,1RECV_F0,1F0,1B0,1SEND_B0#1,2RECV_B1,WAIT(0;1),2B1"}},
                      {"routes",
                       {{{"stages", {0, 1}}, {"microbatches", {0}}},
                        {{"stages", {2, 3}}, {"microbatches", {1}}}}}}}});
  REQUIRE(dual.ok());
  const Svg d = parse(draw(dual, {.width = 1200, .interactive = true, .id_prefix = "d-"}));
  std::size_t hatched_ops = 0;
  for (const auto* b : d.all("rect", "op")) {
    const int rank = std::stoi(b->attr("data-rank")), pos = std::stoi(b->attr("data-pos"));
    hatched_ops += rec_microbatch(dual, rank, pos) == 1 ? 1 : 0;
  }
  CHECK(hatched_ops == 4);
  CHECK(d.all("rect", "reverse").size() == hatched_ops);
  for (const auto* h : d.all("rect", "reverse")) CHECK(h->attr("fill") == "url(#d-hatch)");
  CHECK(d.all("pattern").size() == 1);
  CHECK(d.all("pattern")[0]->attr("id") == "d-hatch");
}

TEST_CASE("svg_timeline.long_title_wraps", "[svg]") {
  // A title wider than the picture wraps at its separators instead of running off the edge; each
  // line fits (bold 14 px: at most 8 px a character), and the legend and rows move down for it.
  const std::string name(60, 'n');
  const auto rec = simulate(base_config(name, "1f1b", 2, 2, 1, "async"));
  const Svg narrow = parse(draw(rec, {.width = 400, .interactive = false, .id_prefix = ""}));
  const auto spans = narrow.all("tspan");
  REQUIRE(spans.size() >= 2);
  for (const auto* t : spans) {
    INFO(t->text);
    // One part longer than a line is kept whole; the others fit.
    std::size_t chars = 0;  // code points: the separator is two bytes
    for (unsigned char c : t->text) chars += (c & 0xC0) != 0x80;
    if (t->text.find(name) == std::string::npos) CHECK(8.0 * chars <= 400 - 70 - 16);
  }
  const Svg wide = parse(draw(rec, {.width = 2000, .interactive = false, .id_prefix = ""}));
  CHECK(wide.all("tspan").size() == 1);
  CHECK(narrow.root().num("height") > wide.root().num("height"));
}

TEST_CASE("svg_timeline.merged_runs_keep_kind_shares", "[svg]") {
  // Merged runs show each kind's share of their time as a band: 1F1B's steady state, half F and
  // half B by count and a third F by time (B = 2F), is two colours, not the larger one.
  const auto rec = simulate("1f1b", 8, 256);
  const Svg svg = parse(draw(rec, {.width = 320, .interactive = false, .id_prefix = ""}));
  const auto shares = svg.all("rect", "share");
  REQUIRE(!shares.empty());
  std::set<std::string> colours;
  for (const auto* s : shares) colours.insert(s->attr("fill"));
  CHECK(colours.size() >= 2);
  // The bands of one run fill the row height exactly.
  double run_height = 0;
  double x = -1;
  for (const auto& e : svg.elements) {
    if (e.name != "rect" || !e.has_class("share")) continue;
    if (e.num("x") != x) {
      if (x >= 0) CHECK(run_height == Approx(svg.all("rect", "merged")[0]->num("height")));
      x = e.num("x");
      run_height = 0;
    }
    run_height += e.num("height");
  }
}

TEST_CASE("svg_timeline.overlapped_label_explained", "[svg]") {
  // An overlapped F&B box is labelled "7/13"; the legend says what the two numbers are, and only
  // when the run has such a box.
  json dp = base_config("dualpipe", "dualpipe", 4, 8, 1, "async");
  dp["schedule"].erase("chunks");
  dp["costs"] = {{"forward", 1.0}, {"backward_input", 1.0}, {"backward_weight", 1.0}};
  const Svg dual = parse(draw(simulate(dp)));
  CHECK(dual.raw.find("F&amp;B overlapped (label: F&apos;s/B&apos;s microbatch)") !=
        std::string::npos);
  const Svg plain = parse(draw(simulate("1f1b", 4, 8)));
  CHECK(plain.raw.find("overlapped") == std::string::npos);
}
