// HTML report (viz/html_report.hpp): a well-formed page that loads nothing from the network, one
// table row per run, one timeline and one memory chart per recorded run, the sweep chart with the
// closed form, escaped names, the deadlock in words, and the origin of each run.
#include <fmt/format.h>

#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "paths.hpp"
#include "ppsim/config/prepare.hpp"
#include "ppsim/sim/analysis.hpp"
#include "ppsim/viz/html_report.hpp"
#include "ppsim/viz/palette.hpp"

namespace {

using namespace ppsim;
using nlohmann::json;

record::RunRecord simulate(const std::string& name, const std::string& kind, int P, int M,
                           const std::string& style = "async", bool free_comm = false) {
  json comm = {{"style", style}, {"boundary_bytes", 4096}};
  if (!free_comm) comm["latency"] = 0.05;
  if (style == "blocking") comm["eager_limit"] = 0;
  json j = {{"name", name},
            {"schedule", {{"kind", kind}, {"ranks", P}, {"microbatches", M}}},
            {"costs", {{"forward", 1.0}, {"backward", 2.0}}},
            {"comm", comm},
            {"memory", {{"activation_bytes", 1 << 20}, {"static_bytes", 1 << 30}}}};
  return sim::analyze(config::parse_config(j, "html-test.json"), {.trace = true});
}

std::string report(const std::vector<record::RunRecord>& runs,
                   const viz::HtmlReportOptions& options = {}) {
  std::ostringstream out;
  viz::write_html_report(out, runs, options);
  return out.str();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// The page without the contents of its <script> and <style> elements (markup only).
std::string markup(const std::string& html) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const auto open = html.find("<script", pos);
    if (open == std::string::npos) break;
    const auto body = html.find('>', open);
    const auto close = html.find("</script>", body);
    REQUIRE(close != std::string::npos);
    out += html.substr(pos, body + 1 - pos);
    pos = close;
  }
  out += html.substr(pos);
  return out;
}

// The JSON the page's charts are drawn from.
json page_data(const std::string& html) {
  const std::string open = "<script id=\"ppsim-data\" type=\"application/json\">";
  const auto begin = html.find(open);
  REQUIRE(begin != std::string::npos);
  const auto end = html.find("</script>", begin);
  return json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

// Opening and closing tags of the main elements balance, outside scripts.
void require_balanced(const std::string& html) {
  const std::string m = markup(html);
  for (const std::string tag :
       {"html",   "head",  "body",   "table", "thead", "tbody", "tr", "td", "th",
        "div",    "svg",   "h1",     "h2",    "h3",    "ul",    "li", "p",  "pre",
        "script", "style", "canvas", "title", "code",  "span",  "a"}) {
    const std::regex open("<" + tag + "[ >]");
    const auto opens =
        std::distance(std::sregex_iterator(m.begin(), m.end(), open), std::sregex_iterator());
    INFO("<" << tag << ">");
    CHECK(opens == static_cast<long>(count(m, "</" + tag + ">")));
  }
  CHECK(html.starts_with("<!DOCTYPE html>\n"));
  CHECK(count(m, "<html") == 1);
}

}  // namespace

TEST_CASE("html_report.table_row_per_run_timeline", "[html_report]") {
  // html report: one table row per run, a timeline and a memory chart per recorded run
  auto measured = simulate("1f1b measured", "1f1b", 4, 8);
  measured.info.origin = "measured";
  measured.trace->origin = "measured";
  const std::vector<record::RunRecord> runs{simulate("gpipe", "gpipe", 4, 8),
                                            simulate("1f1b", "1f1b", 4, 8), measured};
  const std::string html = report(runs);
  require_balanced(html);
  CHECK(count(html, "<tr id=\"row-") == 3);
  CHECK(count(html, "<div class=\"timeline\">") == 3);
  CHECK(count(markup(html), "<svg") >= 3);
  CHECK(count(html, "<canvas id=\"chart-mem-") == 3);
  CHECK(count(html, "<canvas") == 3);  // one M per schedule: no sweep chart
  CHECK(html.find("data-runs=\"3\" data-timelines=\"3\" data-expected-charts=\"3\"") !=
        std::string::npos);
  // The origin of each run, in its heading and in the table.
  CHECK(count(html, "<div class=\"run\" id=\"run-0\" data-origin=\"simulated\">") == 1);
  CHECK(count(html, "<div class=\"run\" id=\"run-1\" data-origin=\"simulated\">") == 1);
  CHECK(count(html, "<div class=\"run\" id=\"run-2\" data-origin=\"measured\">") == 1);
  CHECK(count(html, "<td class=\"origin\" data-v=\"measured\">measured</td>") == 1);
  // The table is sortable: every cell carries the value its column sorts by.
  CHECK(count(html, "<th scope=\"col\">") == 15);
  CHECK(count(html, "<td ") == 3 * 15);
  CHECK(html.find("data-v=\"" + fmt::format("{}", runs[0].metrics->makespan) + "\"") !=
        std::string::npos);
}

TEST_CASE("html_report.self_contained_nothing_fetched_chart", "[html_report]") {
  // html report: self-contained, nothing fetched, Chart.js embedded with its version
  const std::string html = report({simulate("gpipe", "gpipe", 2, 2)});
  const std::string version = viz::chart_js_version();
  CHECK(std::regex_match(version, std::regex("[0-9]+\\.[0-9]+\\.[0-9]+")));
  CHECK(html.find("/*!\n * Chart.js v" + version) != std::string::npos);
  CHECK(html.find("Charts drawn with Chart.js " + version) != std::string::npos);
  // Outside the embedded library's own text, no address at all; no element loads anything.
  // (The SVG namespace name is an identifier, never fetched.)
  std::string m = markup(html);
  const std::string xmlns = " xmlns=\"http://www.w3.org/2000/svg\"";
  for (auto p = m.find(xmlns); p != std::string::npos; p = m.find(xmlns)) m.erase(p, xmlns.size());
  CHECK(m.find("http://") == std::string::npos);
  CHECK(m.find("https://") == std::string::npos);
  CHECK(count(html, "<script") == 3);
  CHECK(m.find(" src=") == std::string::npos);
  CHECK(m.find("<link") == std::string::npos);
  CHECK(m.find("<img") == std::string::npos);
  CHECK(m.find("url(") == std::string::npos);
  CHECK(m.find("Content-Security-Policy\" content=\"default-src 'none';") != std::string::npos);
}

TEST_CASE("html_report.names_escaped_markup_chart_data", "[html_report]") {
  // html report: names are escaped in markup and in the chart data
  const std::string name = "x<&\"'y</script><b>";
  const std::string html = report({simulate(name, "1f1b", 2, 4)});
  require_balanced(html);
  CHECK(html.find(name) == std::string::npos);
  CHECK(html.find("<b>") == std::string::npos);
  CHECK(html.find("x&lt;&amp;&quot;&apos;y&lt;/script&gt;&lt;b&gt;") != std::string::npos);
  CHECK(count(html, "</script>") == 3);
  // The data block still carries the name intact for the chart titles.
  const json data = page_data(html);
  CHECK(data["memory"][0]["title"].get<std::string>().ends_with(name));
}

TEST_CASE("html_report.deadlock_drawn_up_hang_cycle", "[html_report]") {
  // html report: a deadlock is drawn up to the hang and its cycle explained in words
  const auto dead = simulate("1f1b blocking", "1f1b", 4, 8, "blocking");
  REQUIRE(dead.deadlock);
  REQUIRE(!dead.deadlock->cycles.empty());
  REQUIRE(dead.trace);
  const std::string html = report({dead});
  require_balanced(html);
  CHECK(count(html, "<div class=\"deadlock\">") == 1);
  CHECK(count(html, "<li class=\"cycle\">") == dead.deadlock->cycles.size());
  const auto& first = dead.deadlock->cycles.front().front();
  CHECK(html.find(fmt::format("Cycle 1: rank {} is blocked in <code>{}</code>", first.rank,
                              first.op)) != std::string::npos);
  CHECK(html.find("no rank in the cycle can move") != std::string::npos);
  CHECK(html.find("verdict bad") != std::string::npos);
  CHECK(count(html, "<div class=\"timeline\">") == 1);
  // The shared time axis ends where the ranks hung.
  double hang = 0;
  for (const auto& r : dead.trace->ranks) hang = std::max(hang, r.end);
  CHECK(page_data(html)["time_end"].get<double>() == Approx(hang));
}

TEST_CASE("html_report.hang_without_cycle_names_unmatched", "[html_report]") {
  // html report: a hang without a cycle names the unmatched op and who waits on it
  auto run = simulate("hang", "1f1b", 4, 8, "blocking");
  REQUIRE(run.deadlock);
  // As the executor's watchdog may report it: no cycle, one op waiting on a finished rank, one
  // rank waiting on that one (op texts as a measured record could carry them, escaped on the page).
  run.deadlock->cycles.clear();
  run.deadlock->cycles_total = 0;
  run.deadlock->unmatched = {{3, 7, "3RECV_F<7>", 2, ""}};
  run.deadlock->blocked = {{2, 5, "2WAIT", 3, "2SEND_F&1"}};
  const std::string html = report({run});
  require_balanced(html);
  CHECK(html.find("Hang: ranks wait on ranks that have finished.") != std::string::npos);
  CHECK(count(html, "<li class=\"cycle\">") == 0);
  CHECK(html.find("<li class=\"unmatched\">Unmatched: rank 3 is blocked in <code>3RECV_F&lt;7&gt;"
                  "</code>, but rank 2 has finished.</li>") != std::string::npos);
  CHECK(html.find("<li class=\"blocked\">Waiting on a stuck rank: rank 2 is blocked in "
                  "<code>2WAIT</code> (waiting for <code>2SEND_F&amp;1</code>), which needs rank "
                  "3.</li>") != std::string::npos);
}

TEST_CASE("html_report.memory_series_peak_rank_s", "[html_report]") {
  // html report: memory series peak at each rank's peak memory (static + dynamic)
  const auto run = simulate("gpipe", "gpipe", 4, 8);
  for (const std::size_t limit : {std::size_t{2000}, std::size_t{8}}) {
    viz::HtmlReportOptions options;
    options.max_memory_points = limit;  // 8: buckets keep their extremes, peaks stay
    const json data = page_data(report({run}, options));
    const auto& memory = data["memory"][0];
    REQUIRE(memory["y_unit"] == "GiB");  // 1 GiB static per rank
    REQUIRE(memory["ranks"].size() == 4);
    for (std::size_t r = 0; r < 4; ++r) {
      double peak = 0, prev_x = -1;
      for (const auto& p : memory["ranks"][r]) {
        peak = std::max(peak, p["y"].get<double>());
        CHECK(p["x"].get<double>() >= prev_x);  // in time order, as a stepped line needs
        prev_x = p["x"].get<double>();
      }
      INFO("rank " << r << ", limit " << limit);
      // The page keeps 1/10000 GiB (see memory_series): within half of that.
      CHECK(peak ==
            Approx(run.metrics->per_rank[r].peak_memory_bytes / double(1 << 30)).margin(0.5e-4));
      if (limit == 8) CHECK(memory["ranks"][r].size() <= 8);
    }
  }
}

TEST_CASE("html_report.microbatch_sweep_gets_bubble_chart", "[html_report]") {
  // html report: a microbatch sweep gets the bubble chart, GPipe sits on (P-1)/(M+P-1)
  std::vector<record::RunRecord> runs;
  const int P = 4;
  for (const std::string kind : {"gpipe", "1f1b"})
    for (const int M : {4, 8, 16, 32})
      runs.push_back(simulate(kind + fmt::format("/M{}", M), kind, P, M, "async", true));
  // The same 1F1B points "measured": a line of their own, not merged into the simulated one.
  for (std::size_t i = 4; i < 8; ++i) {
    runs.push_back(runs[i]);
    runs.back().trace->origin = "measured";
  }
  const std::string html = report(runs);
  require_balanced(html);
  CHECK(count(html, "<canvas id=\"chart-sweep\">") == 1);
  CHECK(html.find("data-expected-charts=\"13\"") != std::string::npos);  // 12 memory + sweep
  const json sweep = page_data(html)["sweep"];
  REQUIRE(sweep["series"].size() == 3);
  CHECK(sweep["log_x"] == true);
  std::map<std::string, json> by_label;
  for (const auto& s : sweep["series"]) by_label[s["label"]] = s["data"];
  REQUIRE(by_label.count("gpipe (P=4)") == 1);
  REQUIRE(by_label.count("1f1b (P=4)") == 1);
  REQUIRE(by_label.count("1f1b (P=4) measured") == 1);
  CHECK(by_label["1f1b (P=4) measured"] == by_label["1f1b (P=4)"]);
  for (const auto& p : by_label["gpipe (P=4)"]) {
    const double M = p["x"].get<double>();
    CHECK(p["y"].get<double>() == Approx((P - 1) / (M + P - 1)));
  }
  // The reference curve is the closed form at every sample, from the smallest M to the largest.
  const auto& ref = sweep["reference"][0]["data"];
  CHECK(ref.front()["x"].get<double>() == Approx(4));
  CHECK(ref.back()["x"].get<double>() == Approx(32));
  for (const auto& p : ref) {
    const double M = p["x"].get<double>();
    CHECK(p["y"].get<double>() == Approx((P - 1) / (M + P - 1)));
  }
}

TEST_CASE("html_report.sweep_under_mpi_nccl_semantics", "[html_report]") {
  // html report: one sweep under mpi and nccl semantics is two lines, labelled apart
  std::vector<record::RunRecord> runs;
  for (const int M : {4, 8, 16}) runs.push_back(simulate(fmt::format("M{}", M), "1f1b", 4, M));
  for (std::size_t i = 0; i < 3; ++i) {
    runs.push_back(runs[i]);
    runs.back().info.semantics = "nccl";
    runs.back().metrics->bubble_fraction += 0.01;  // told apart below
  }
  const json sweep = page_data(report(runs))["sweep"];
  REQUIRE(sweep["series"].size() == 2);
  std::map<std::string, json> by_label;
  for (const auto& s : sweep["series"]) by_label[s["label"]] = s["data"];
  REQUIRE(by_label.count("1f1b async (P=4)") == 1);
  REQUIRE(by_label.count("1f1b async, nccl (P=4)") == 1);
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(by_label["1f1b async, nccl (P=4)"][i]["y"].get<double>() ==
          Approx(by_label["1f1b async (P=4)"][i]["y"].get<double>() + 0.01));
}

TEST_CASE("html_report.run_without_trace_listed_drawn", "[html_report]") {
  // html report: a run without a trace is listed, not drawn
  auto run = simulate("not run", "gpipe", 2, 2);
  run.trace.reset();
  run.metrics.reset();
  const std::string html = report({run, simulate("ran", "gpipe", 2, 2)});
  require_balanced(html);
  CHECK(count(html, "<tr id=\"row-") == 2);
  CHECK(count(html, "<div class=\"timeline\">") == 1);
  CHECK(count(html, "Not run: the program is invalid.") == 1);
  CHECK(html.find("data-runs=\"2\" data-timelines=\"1\" data-expected-charts=\"1\"") !=
        std::string::npos);
}

namespace {

// `ppsim ARGS` with stderr folded into the returned output; the exit code in `code`.
std::string ppsim_cli(const std::string& args, int& code) {
  FILE* pipe = ::popen((std::string(PPSIM_BINARY) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("html_report.exit_1_page_written_when", "[html_report][cli]") {
  // ppsim report: exit 1 with the page written when a schedule deadlocks, exit 2 naming a bad
  // config, with no page and no temporary left
  char tmpl[] = "/tmp/ppsim-report-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::filesystem::path dir = tmpl;
  const std::string configs = std::string(PPSIM_SOURCE_DIR) + "/configs/";
  const auto page = dir / "report.html";
  int code = -1;

  std::string out = ppsim_cli("report " + configs + "gpipe.json " + configs +
                                  "1f1b-blocking-deadlock.json -o " + page.string(),
                              code);
  CHECK(code == 1);
  CHECK_THAT(out, Catch::Contains("FAIL    1f1b-all-blocking (deadlocks)"));
  const std::string html = slurp(page);
  CHECK(html.ends_with("</html>\n"));
  CHECK(count(html, "<tr id=\"row-") == 2);
  CHECK(count(html, "<div class=\"deadlock\">") == 1);

  const auto bad = dir / "bad.json";
  std::ofstream(bad) << R"({"schedule": {"kind": "gpipe", "ranks": 0, "microbatches": 4}})";
  out =
      ppsim_cli("report " + configs + "gpipe.json " + bad.string() + " -o " + page.string(), code);
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Contains(bad.string() + ": key 'schedule.ranks'"));
  CHECK(slurp(page) == html);  // the earlier page stays as it was
  out = ppsim_cli("report " + bad.string() + " -o " + (dir / "new.html").string(), code);
  CHECK(code == 2);
  // -o naming an input config: refused, the config untouched.
  const std::string bad_text = slurp(bad);
  out = ppsim_cli("report " + configs + "gpipe.json " + bad.string() + " -o " + bad.string(), code);
  CHECK(code == 2);
  CHECK_THAT(out, Catch::Contains("writing it would replace the input"));
  CHECK(slurp(bad) == bad_text);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  CHECK(files == 2);  // report.html and bad.json: no new.html, no .ppsim-XXXXXX
  std::filesystem::remove_all(dir);
}

TEST_CASE("html_report.sweep_note_when_comm_separates", "[html_report]") {
  // With free communication GPipe and 1F1B sit on the closed form and nothing is said; with a
  // latency they sit above it, and a note above the chart says how far and why.
  for (const bool free_comm : {true, false}) {
    std::vector<record::RunRecord> runs;
    for (const std::string kind : {"gpipe", "1f1b"})
      for (const int M : {4, 8, 16})
        runs.push_back(simulate(kind + fmt::format("/M{}", M), kind, 4, M, "async", free_comm));
    const std::string html = report(runs);
    const json sweep = page_data(html)["sweep"];
    INFO("free communication " << free_comm);
    if (free_comm) {
      CHECK(sweep["closed_form_gap"].get<double>() < 1e-9);
      CHECK(html.find("id=\"sweep-note\"") == std::string::npos);
    } else {
      CHECK(sweep["closed_form_gap"].get<double>() > 0.005);
      CHECK(html.find("id=\"sweep-note\"") != std::string::npos);
    }
  }
}

TEST_CASE("html_report.memory_chart_ticks_ranks_colours", "[html_report]") {
  // The memory chart takes the timeline's own tick step (one grid over both), and its rank
  // colours are none of the op kinds' (a rank's line never reads as an F or a B).
  const std::string html = report({simulate("a", "1f1b", 4, 8)});
  CHECK(html.find("data-tick-step=\"") != std::string::npos);
  CHECK(html.find("svg.dataset.tickStep") != std::string::npos);
  const json colours = page_data(html)["rank_colors"];
  REQUIRE(colours.size() >= 8);
  for (const auto kind : {schedules::OpKind::F, schedules::OpKind::B, schedules::OpKind::I,
                          schedules::OpKind::W, schedules::OpKind::OVERLAP_F_B})
    for (const auto& c : colours) CHECK(c.get<std::string>() != viz::kind_color(kind));
}
