// JUnit XML of `ppsim check --junit` (cli/junit.hpp), read back with libxml2: valid against the
// shape CI servers read (an XML Schema of testsuites/testsuite/testcase/failure|error), counts
// that agree with the cases, and every string back exactly as given (or U+FFFD where XML cannot
// carry a character).
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlschemas.h>

#include <catch2/catch.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "junit.hpp"
#include "ppsim/base/escape.hpp"

using ppsim::base::xml_escape;
using ppsim::cli::JunitCase;
using ppsim::cli::write_junit;

namespace {

// The JUnit shape as GitLab, Jenkins and the GitHub summary actions read it.
constexpr const char* kSchema = R"(<?xml version="1.0" encoding="UTF-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" elementFormDefault="qualified">
  <xs:complexType name="problem">
    <xs:simpleContent>
      <xs:extension base="xs:string">
        <xs:attribute name="message" type="xs:string" use="required"/>
        <xs:attribute name="type" type="xs:string" use="required"/>
      </xs:extension>
    </xs:simpleContent>
  </xs:complexType>
  <xs:element name="testsuites">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="testsuite" minOccurs="1" maxOccurs="1">
          <xs:complexType>
            <xs:sequence>
              <xs:element name="testcase" minOccurs="0" maxOccurs="unbounded">
                <xs:complexType>
                  <xs:choice minOccurs="0" maxOccurs="1">
                    <xs:element name="failure" type="problem"/>
                    <xs:element name="error" type="problem"/>
                  </xs:choice>
                  <xs:attribute name="classname" type="xs:string" use="required"/>
                  <xs:attribute name="name" type="xs:string" use="required"/>
                </xs:complexType>
              </xs:element>
            </xs:sequence>
            <xs:attribute name="name" type="xs:string" use="required"/>
            <xs:attribute name="tests" type="xs:nonNegativeInteger" use="required"/>
            <xs:attribute name="failures" type="xs:nonNegativeInteger" use="required"/>
            <xs:attribute name="errors" type="xs:nonNegativeInteger" use="required"/>
            <xs:attribute name="skipped" type="xs:nonNegativeInteger" use="required"/>
          </xs:complexType>
        </xs:element>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger" use="required"/>
    </xs:complexType>
  </xs:element>
</xs:schema>)";

struct Doc {
  std::unique_ptr<xmlDoc, void (*)(xmlDoc*)> doc{nullptr, xmlFreeDoc};
};

Doc parse(const std::string& xml) {
  Doc d;
  d.doc.reset(xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "junit.xml", nullptr,
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  return d;
}

bool valid(xmlDoc* doc) {
  std::unique_ptr<xmlSchemaParserCtxt, void (*)(xmlSchemaParserCtxt*)> pc(
      xmlSchemaNewMemParserCtxt(kSchema, static_cast<int>(std::string(kSchema).size())),
      xmlSchemaFreeParserCtxt);
  std::unique_ptr<xmlSchema, void (*)(xmlSchema*)> schema(xmlSchemaParse(pc.get()), xmlSchemaFree);
  REQUIRE(schema);
  std::unique_ptr<xmlSchemaValidCtxt, void (*)(xmlSchemaValidCtxt*)> vc(
      xmlSchemaNewValidCtxt(schema.get()), xmlSchemaFreeValidCtxt);
  return xmlSchemaValidateDoc(vc.get(), doc) == 0;
}

std::string attr(xmlNode* n, const char* name) {
  xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
  if (!v) return "<absent>";
  std::string s = reinterpret_cast<const char*>(v);
  xmlFree(v);
  return s;
}

std::string content(xmlNode* n) {
  xmlChar* v = xmlNodeGetContent(n);
  std::string s = v ? reinterpret_cast<const char*>(v) : "";
  xmlFree(v);
  return s;
}

std::vector<xmlNode*> children(xmlNode* n, const std::string& name) {
  std::vector<xmlNode*> out;
  for (xmlNode* c = n->children; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE && name == reinterpret_cast<const char*>(c->name))
      out.push_back(c);
  return out;
}

std::string junit(const std::vector<JunitCase>& cases) {
  std::ostringstream out;
  write_junit(out, "ppsim check", cases);
  return out.str();
}

}  // namespace

TEST_CASE("junit.suite_testcase_per_schedule_counts", "[junit]") {
  // junit: one suite, a testcase per schedule, counts that agree
  const std::vector<JunitCase> cases = {
      {"schedules/a.json", "1f1b-p4-m8", JunitCase::Result::passed, "", "", ""},
      {"schedules/b.json", "all-blocking", JunitCase::Result::failure, "deadlock",
       "DEADLOCK (1 cycle): cycle: rank 2 blocked in 2SEND_F1 -> rank 3",
       "FAIL  schedules/b.json (all-blocking): DEADLOCK (1 cycle)\n      cycle: ...\n"},
      {"schedules/c.json", "c", JunitCase::Result::error, "bad_input",
       "schedules/c.json:1:12: malformed JSON", "schedules/c.json:1:12: malformed JSON\n"},
      {"schedules/d/e.json", "e", JunitCase::Result::failure, "invalid", "INVALID (1 error)",
       "FAIL ...\n"}};
  const std::string xml = junit(cases);
  const Doc d = parse(xml);
  REQUIRE(d.doc);
  CHECK(valid(d.doc.get()));
  xmlNode* root = xmlDocGetRootElement(d.doc.get());
  CHECK(std::string(reinterpret_cast<const char*>(root->name)) == "testsuites");
  for (xmlNode* n : {root, children(root, "testsuite").at(0)}) {
    CHECK(attr(n, "tests") == "4");
    CHECK(attr(n, "failures") == "2");
    CHECK(attr(n, "errors") == "1");
    CHECK(attr(n, "name") == "ppsim check");
  }
  const auto tcs = children(children(root, "testsuite").at(0), "testcase");
  REQUIRE(tcs.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CHECK(attr(tcs[i], "classname") == cases[i].classname);
    CHECK(attr(tcs[i], "name") == cases[i].name);
    const auto failures = children(tcs[i], "failure"), errors = children(tcs[i], "error");
    CHECK(failures.size() == (cases[i].result == JunitCase::Result::failure ? 1u : 0u));
    CHECK(errors.size() == (cases[i].result == JunitCase::Result::error ? 1u : 0u));
    for (xmlNode* p : failures.empty() ? errors : failures) {
      CHECK(attr(p, "type") == cases[i].type);
      CHECK(attr(p, "message") == cases[i].message);
      CHECK(content(p) == cases[i].text);
    }
  }
  SECTION("no time or timestamp: the same cases give the same bytes") {
    CHECK(xml.find("time") == std::string::npos);
    CHECK(junit(cases) == xml);
  }
  SECTION("no case at all is still a valid report") {
    const Doc empty = parse(junit({}));
    REQUIRE(empty.doc);
    CHECK(valid(empty.doc.get()));
  }
}

TEST_CASE("junit.hostile_strings_come_back_exactly", "[junit]") {
  // junit: hostile strings come back exactly, or as U+FFFD where XML has no character
  const std::string markup = "a<b>&c\"d'e ]]> <!-- x --> &amp; \t tab\nnew line\r\nCRLF";
  const std::string bad =
      std::string("nul\0bell\x07 esc\x1b del\x7f", 19) +
      " lone\x80 cut\xe2\x82 overlong\xc0\xaf surrogate\xed\xa0\x80 fffe\xef\xbf\xbe";
  const std::string fine = "ümlaut → 🚀 \xe2\x80\xa8";
  const std::string want_bad =
      "nul\xEF\xBF\xBD"
      "bell\xEF\xBF\xBD esc\xEF\xBF\xBD del\xEF\xBF\xBD lone\xEF\xBF\xBD "
      "cut\xEF\xBF\xBD\xEF\xBF\xBD overlong\xEF\xBF\xBD\xEF\xBF\xBD "
      "surrogate\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD fffe\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD";
  const std::vector<JunitCase> cases = {
      {markup, markup, JunitCase::Result::failure, markup, markup, markup},
      {bad, bad, JunitCase::Result::error, bad, bad, bad},
      {fine, fine, JunitCase::Result::failure, fine, fine, fine}};
  const Doc d = parse(junit(cases));
  REQUIRE(d.doc);
  CHECK(valid(d.doc.get()));
  const auto tcs =
      children(children(xmlDocGetRootElement(d.doc.get()), "testsuite").at(0), "testcase");
  REQUIRE(tcs.size() == 3);
  const std::vector<std::string> want = {markup, want_bad, fine};
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("case " << i);
    CHECK(attr(tcs[i], "classname") == want[i]);
    CHECK(attr(tcs[i], "name") == want[i]);
    xmlNode* p = tcs[i]->children;
    while (p && p->type != XML_ELEMENT_NODE) p = p->next;
    REQUIRE(p);
    CHECK(attr(p, "message") == want[i]);
    CHECK(attr(p, "type") == want[i]);
    CHECK(content(p) == want[i]);
  }
  SECTION("the escapes themselves") {
    CHECK(xml_escape("<&>\"'") == "&lt;&amp;&gt;&quot;&apos;");
    CHECK(xml_escape("a\nb\tc\rd") == "a&#10;b&#9;c&#13;d");
    CHECK(xml_escape("a\nb\tc\rd", false) == "a\nb\tc&#13;d");
  }
}
