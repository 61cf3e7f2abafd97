// A deterministic mutation fuzzer for the topology and graph file readers:
// every file of tests/fixtures (machines included) and of the kept corpus
// tests/fixtures/fuzz is cut, spliced, repeated and salted with garbage,
// and each mutant goes through everything a user's file goes through
// (parse, model, search, channel budget, plan over several hosts, graph
// file). Nothing may crash or hang; what is refused is refused with a
// message that names a line.
//
// WEFT_FUZZ_ITERATIONS=N runs N mutants per seed file (default 60);
// WEFT_FUZZ_SAVE=DIR writes each mutant to DIR/current.xml before running
// it, so a crash leaves the input behind to add to the corpus.
#include <gtest/gtest.h>

#include <dirent.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "graph/channel_budget.h"
#include "graph/graph_file.h"
#include "graph/plan.h"
#include "graph/topo_xml.h"

namespace weft::graph {
namespace {

const std::string kFixtures = WEFT_FIXTURES_DIR;

std::vector<std::string> xmlFiles(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".xml") == 0) out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// splitmix64: a fixed sequence for a fixed seed, the same on every machine.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

const char* const kGarbage[] = {"",  "-1", "99999999999999999999", "0x7fffffff", "nan", "1e308",   "\"", "&amp;&#0;",
                                "<", "0",  "-2147483648",          "16.0 GT/s",  "  ",  "\xff\xfe"};
const char* const kElements[] = {"<gpu dev=\"0\" sm=\"90\"/>",
                                 "<nvlink target=\"0000:01:00.0\" count=\"64\"/>",
                                 "<pci busid=\"0000:ff:00.0\">",
                                 "</pci>",
                                 "<nic><net name=\"x\"/></nic>",
                                 "<cpu numaid=\"-1\">",
                                 "<c2c bw=\"1\" count=\"64\"/>",
                                 "<!-- -->",
                                 "<?xml?>",
                                 "<unknown a=\"b\">",
                                 "</system>"};

std::string mutate(const std::string& in, Rng& rng) {
  std::string s = in;
  const int edits = 1 + static_cast<int>(rng.below(2));
  for (int e = 0; e < edits; ++e) {
    const size_t at = rng.below(s.size() + 1);
    switch (rng.below(7)) {
      case 0:  // truncate
        s.resize(at);
        break;
      case 1:  // delete a span
        s.erase(at, rng.below(64));
        break;
      case 2: {  // repeat a span (huge counts of elements)
        const std::string span = s.substr(at, rng.below(256));
        const size_t times = 1 + rng.below(40);
        std::string rep;
        for (size_t i = 0; i < times; ++i) rep += span;
        s.insert(at, rep);
        break;
      }
      case 3: {  // a garbage attribute value: replace the next quoted text
        const size_t q = s.find('"', at);
        const size_t end = q == std::string::npos ? q : s.find('"', q + 1);
        if (end != std::string::npos) s.replace(q + 1, end - q - 1, kGarbage[rng.below(std::size(kGarbage))]);
        break;
      }
      case 4:  // an element where it does not belong
        s.insert(at, kElements[rng.below(std::size(kElements))]);
        break;
      case 5:  // random bytes
        for (size_t i = rng.below(8); i > 0; --i)
          s.insert(s.begin() + static_cast<long>(rng.below(s.size() + 1)), static_cast<char>(rng.next()));
        break;
      default: {  // a digit changed (counts, widths, devs)
        const size_t d = s.find_first_of("0123456789", at);
        if (d != std::string::npos) s[d] = static_cast<char>('0' + rng.below(10));
      }
    }
  }
  return s;
}

// Everything a loaded file goes through. Returns false only on a defect
// (an error without a line, a plan that does not cover its ranks).
bool exercise(const std::string& text, const Topology& graphHost, std::string* why) {
  auto parsed = parseXml(text);
  if (!parsed.ok()) {
    if (parsed.status().message().rfind("line ", 0) != 0)
      return (*why = "parse error without a line: " + parsed.status().message()), false;
    return true;
  }
  const XmlNode& root = *parsed.value();
  if (root.name == "graphs") {
    auto g = graphsFromXml(root, graphHost);
    if (g.ok()) imposeRings(graphHost, 4, g.value());
    return true;
  }
  auto topo = topologyFromXml(root);
  if (!topo.ok()) {
    if (topo.status().message().rfind("line ", 0) != 0)
      return (*why = "model error without a line: " + topo.status().message()), false;
    return true;
  }
  const Topology& t = topo.value();
  const RingSearch r = searchRings(t, 3);
  const ChannelBudget b = channelBudget(t, r, 2, 1, 8);
  if (b.channels < 1 || b.channels > 8) return (*why = "channel count out of bounds"), false;
  const std::vector<int> local = localRanks(t);
  const ChannelPlan p = buildChannelPlan(r, local, 3);
  for (const auto& ring : p.rings)
    if (static_cast<int>(ring.size()) != p.nranks) return (*why = "ring does not cover every rank"), false;
  writeXml(*topologyToXml(t));
  writeXml(*graphsToXml(t, r, &b));
  return true;
}

TEST(XmlFuzz, CorpusAndMutantsNeverCrash) {
  std::vector<std::string> seeds = xmlFiles(kFixtures);
  for (const char* dir : {"/machines", "/machines/detected", "/fuzz"})
    for (const std::string& f : xmlFiles(kFixtures + dir)) seeds.push_back(f);
  ASSERT_GE(seeds.size(), 30u);
  auto host = loadTopologyFile(kFixtures + "/nvswitch8.xml");
  ASSERT_TRUE(host.ok()) << host.status().message();
  const char* iterText = std::getenv("WEFT_FUZZ_ITERATIONS");
  const int iterations = iterText ? std::atoi(iterText) : 60;
  const char* save = std::getenv("WEFT_FUZZ_SAVE");
  int mutants = 0, refused = 0;
  for (size_t f = 0; f < seeds.size(); ++f) {
    const std::string seed = slurp(seeds[f]);
    Rng rng{0x5eedULL + f};
    for (int i = -1; i < iterations; ++i) {  // -1: the file itself
      const std::string text = i < 0 ? seed : mutate(seed, rng);
      if (save) std::ofstream(std::string(save) + "/current.xml", std::ios::binary) << text;
      std::string why;
      EXPECT_TRUE(exercise(text, host.value(), &why)) << seeds[f] << " mutant " << i << ": " << why;
      ++mutants;
      refused += !parseXml(text).ok();
    }
  }
  std::printf("xml fuzz: %d inputs from %zu seeds, %d refused by the parser\n", mutants, seeds.size(), refused);
}

// The kept corpus's files are each refused with the line of the problem,
// or load (unknown elements and attributes are skipped, as NCCL skips them).
TEST(XmlFuzz, CorpusErrorsNameTheLine) {
  struct Case {
    const char* file;
    const char* expect;  // a substring of the error; "" means it loads
  };
  const Case cases[] = {
      {"truncated_mid_attr.xml", "line 3:"},
      {"truncated_open_tags.xml", "missing </gpu>"},
      {"empty.xml", "line 1: expected the root element"},
      {"deep_nesting.xml", "nested more than 64 deep"},
      {"huge_counts.xml", "line 3: <pci link_width=\"99999999999999999999\">: expected an integer from 0 to 64"},
      {"garbage_attributes.xml", "line 2: <cpu numaid=\"zero\">: expected an integer"},
      {"unknown_elements.xml", ""},
      {"duplicate_busid.xml", "line 4: <pci busid=\"0000:01:00.0\"> repeats the device of line 3"},
      {"pci_without_busid.xml", "line 3: <pci> without a busid attribute"},
      {"self_and_dangling_nvlinks.xml", ""},
      {"many_nets_no_dev.xml", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto t = loadTopologyFile(kFixtures + "/fuzz/" + c.file);
    if (*c.expect == '\0') {
      EXPECT_TRUE(t.ok()) << t.status().message();
      continue;
    }
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(c.file), std::string::npos) << "names the file: " << t.status().message();
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
  // A GPU's NVLink to itself (VMs report it) adds no link; 40 ports without
  // dev get distinct numbers; a C2C link joins the GPU to its CPU.
  auto self = loadTopologyFile(kFixtures + "/fuzz/self_and_dangling_nvlinks.xml");
  ASSERT_TRUE(self.ok());
  const int gpu = self.value().nodesOf(NodeType::kGpu)[0];
  for (const Link& l : self.value().links(gpu)) EXPECT_NE(l.to, gpu);
  auto nets = loadTopologyFile(kFixtures + "/fuzz/many_nets_no_dev.xml");
  ASSERT_TRUE(nets.ok());
  std::set<int> devs;
  for (int n : nets.value().nodesOf(NodeType::kNet)) devs.insert(nets.value().node(n).dev);
  EXPECT_EQ(devs.size(), 40u);
  const int g = nets.value().nodesOf(NodeType::kGpu)[0];
  const int cpu = nets.value().nodesOf(NodeType::kCpu)[0];
  EXPECT_EQ(nets.value().path(g, cpu).type, PathType::kC2c);
  EXPECT_DOUBLE_EQ(nets.value().path(g, cpu).bw, 345.0);
}

}  // namespace
}  // namespace weft::graph
