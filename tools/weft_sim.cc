// weft-sim: simulated AllReduce times for clusters no machine here has.
//   weft-sim [--nodes N] [--gpus-per-node G | --topo-file F] [--ranks K]
//            [--algos ring,tree,...|all] [--sizes 8,64K,1M,...]
//            [--intra-lat-us A] [--intra-gbs B] [--inter-lat-us A] [--inter-gbs B]
//            [--nics N] [--reduce-gbs B] [--channels C] [--min-channels C]
//            [--buffsize B] [--chunk-steps S] [--torus RxC]
//            [--mode auto|exact|periodic] [--csv | --json]
// Every figure it prints is simulated (src/sim/), never measured; see
// docs/simulator.md.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "graph/topo_xml.h"
#include "graph/xml.h"
#include "sim/simulator.h"

using weft::errorStatus;
using weft::Result;
using weft::Status;
using weft::sim::Mode;
using weft::sim::SimConfig;
using weft::sim::SimResult;
using weft::sim::Simulator;
using weft::tuning::ModelAlgo;

namespace {

struct Options {
  SimConfig config;
  int gpusPerNode = 8;
  int ranks = 0;
  std::string topoFile;
  std::vector<ModelAlgo> algos;
  std::vector<int64_t> sizes = {8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
  bool csv = false, json = false;
  bool linksGiven[3] = {false, false, false};  // intra GB/s, inter GB/s, NICs
};

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--nodes N] [--gpus-per-node G | --topo-file F] [--ranks K] [--algos LIST|all]\n"
               "          [--sizes LIST] [--intra-lat-us A] [--intra-gbs B] [--inter-lat-us A] [--inter-gbs B]\n"
               "          [--nics N] [--reduce-gbs B] [--channels C] [--min-channels C] [--buffsize BYTES]\n"
               "          [--chunk-steps S] [--torus RxC] [--mode auto|exact|periodic] [--csv | --json]\n"
               "algorithms: ring tree oneshot butterfly halvingdoubling hierring torus2d (or all)\n",
               argv0);
  return 2;
}

// "64K", "1M", "2G" (binary multiples) or plain bytes.
Result<int64_t> parseBytes(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  double scale = 1;
  if (end && (*end == 'K' || *end == 'k'))
    scale = 1024.0, ++end;
  else if (end && (*end == 'M' || *end == 'm'))
    scale = 1024.0 * 1024, ++end;
  else if (end && (*end == 'G' || *end == 'g'))
    scale = 1024.0 * 1024 * 1024, ++end;
  if (end == text.c_str() || *end != '\0' || v <= 0)
    return errorStatus(ncclInvalidArgument, "\"%s\" is not a size (expected bytes, or a number with K, M or G)",
                       text.c_str());
  return static_cast<int64_t>(v * scale);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) parts.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<std::vector<ModelAlgo>> parseAlgos(const std::string& text) {
  std::vector<ModelAlgo> algos;
  const int count = static_cast<int>(ModelAlgo::kCount);
  for (const std::string& name : split(lower(text))) {
    if (name == "all") {
      for (int a = 0; a < count; ++a) algos.push_back(static_cast<ModelAlgo>(a));
      continue;
    }
    int found = -1;
    for (int a = 0; a < count; ++a)
      if (name == lower(weft::tuning::modelAlgoName(static_cast<ModelAlgo>(a)))) found = a;
    if (name == "torus") found = static_cast<int>(ModelAlgo::kTorus2D);
    if (found < 0)
      return errorStatus(ncclInvalidArgument,
                         "--algos: unknown algorithm \"%s\" (expected ring, tree, oneshot, butterfly, "
                         "halvingdoubling, hierring, torus2d or all)",
                         name.c_str());
    algos.push_back(static_cast<ModelAlgo>(found));
  }
  return algos;
}

Result<double> parseNumber(const char* flag, const char* text, double min) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= min))
    return errorStatus(ncclInvalidArgument, "%s %s: expected a number of at least %g", flag, text, min);
  return v;
}

Status parseTorus(const char* text, SimConfig* config) {
  if (std::sscanf(text, "%dx%d", &config->torusRows, &config->torusCols) != 2 || config->torusRows < 1 ||
      config->torusCols < 1)
    return errorStatus(ncclInvalidArgument, "--torus %s: expected ROWSxCOLS, e.g. 4x8", text);
  return weft::okStatus();
}

Result<int> parseCount(const char* flag, const char* text) {
  WEFT_ASSIGN_OR_RETURN(double v, parseNumber(flag, text, 1));
  if (v != static_cast<double>(static_cast<int>(v)))
    return errorStatus(ncclInvalidArgument, "%s %s: expected a whole number", flag, text);
  return static_cast<int>(v);
}

// The cluster's shape and what to simulate; false when the flag is not one of them.
Result<bool> parseShapeFlag(const std::string& flag, const char* value, Options* o) {
  const char* f = flag.c_str();
  if (flag == "--nodes") {
    WEFT_ASSIGN_OR_RETURN(o->config.nodes, parseCount(f, value));
  } else if (flag == "--gpus-per-node") {
    WEFT_ASSIGN_OR_RETURN(o->gpusPerNode, parseCount(f, value));
  } else if (flag == "--ranks") {
    WEFT_ASSIGN_OR_RETURN(o->ranks, parseCount(f, value));
  } else if (flag == "--topo-file") {
    o->topoFile = value;
  } else if (flag == "--algos") {
    WEFT_ASSIGN_OR_RETURN(o->algos, parseAlgos(value));
  } else if (flag == "--sizes") {
    o->sizes.clear();
    for (const std::string& s : split(value)) {
      WEFT_ASSIGN_OR_RETURN(int64_t b, parseBytes(s));
      o->sizes.push_back(b);
    }
  } else if (flag == "--torus") {
    WEFT_RETURN_IF_ERROR(parseTorus(value, &o->config));
  } else {
    return false;
  }
  return true;
}

// Link figures; false when the flag is not one of them.
Result<bool> parseLinkFlag(const std::string& flag, const char* value, Options* o) {
  weft::tuning::LinkFigures& l = o->config.links;
  const char* f = flag.c_str();
  if (flag == "--intra-lat-us") {
    WEFT_ASSIGN_OR_RETURN(l.intraLatUs, parseNumber(f, value, 0));
  } else if (flag == "--intra-gbs") {
    WEFT_ASSIGN_OR_RETURN(l.intraGBs, parseNumber(f, value, 1e-6));
    o->linksGiven[0] = true;
  } else if (flag == "--inter-lat-us") {
    WEFT_ASSIGN_OR_RETURN(l.interLatUs, parseNumber(f, value, 0));
  } else if (flag == "--inter-gbs") {
    WEFT_ASSIGN_OR_RETURN(l.interGBs, parseNumber(f, value, 1e-6));
    o->linksGiven[1] = true;
  } else if (flag == "--nics") {
    WEFT_ASSIGN_OR_RETURN(l.nicsPerNode, parseCount(f, value));
    o->linksGiven[2] = true;
  } else if (flag == "--reduce-gbs") {
    WEFT_ASSIGN_OR_RETURN(l.reduceGBs, parseNumber(f, value, 1e-6));
  } else {
    return false;
  }
  return true;
}

// Weft's planning knobs and the simulation mode; false when the flag is not one of them.
Result<bool> parsePlanFlag(const std::string& flag, const char* value, Options* o) {
  const char* f = flag.c_str();
  if (flag == "--channels") {
    WEFT_ASSIGN_OR_RETURN(o->config.plan.channels, parseCount(f, value));
  } else if (flag == "--min-channels") {
    WEFT_ASSIGN_OR_RETURN(o->config.plan.minChannels, parseCount(f, value));
  } else if (flag == "--buffsize") {
    WEFT_ASSIGN_OR_RETURN(int64_t b, parseBytes(value));
    o->config.plan.stepBytes = b / 8;  // NCCL_BUFFSIZE spans the FIFO's 8 steps
  } else if (flag == "--chunk-steps") {
    WEFT_ASSIGN_OR_RETURN(o->config.plan.chunkSteps, parseCount(f, value));
  } else if (flag == "--mode") {
    const std::string m = value;
    if (m != "auto" && m != "exact" && m != "periodic")
      return errorStatus(ncclInvalidArgument, "--mode %s: expected auto, exact or periodic", value);
    o->config.mode = m == "exact" ? Mode::kExact : m == "periodic" ? Mode::kNodePeriodic : Mode::kAuto;
  } else {
    return false;
  }
  return true;
}

// One flag with its value; false when the flag is not known.
Result<bool> parseFlag(const std::string& flag, const char* value, Options* o) {
  WEFT_ASSIGN_OR_RETURN(bool shape, parseShapeFlag(flag, value, o));
  if (shape) return true;
  WEFT_ASSIGN_OR_RETURN(bool link, parseLinkFlag(flag, value, o));
  if (link) return true;
  return parsePlanFlag(flag, value, o);
}

Result<weft::graph::Topology> hostTopology(const Options& o) {
  if (o.topoFile.empty()) return weft::graph::syntheticTopology(o.gpusPerNode);
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<weft::graph::XmlNode> xml, weft::graph::readXmlFile(o.topoFile));
  auto topo = weft::graph::topologyFromXml(*xml);
  if (!topo.ok())
    return errorStatus(ncclInvalidArgument, "%s: %s", o.topoFile.c_str(), topo.status().message().c_str());
  return topo;
}

void printHeader(const Simulator& sim, const Options& o) {
  const weft::tuning::LinkFigures& l = sim.config().links;
  if (o.csv) {
    std::printf("bytes,algorithm,simulated_us,model_us,operations,schedule,node_periodic\n");
    return;
  }
  if (o.json) {
    std::printf(
        "{\"simulated\":true,\"nranks\":%d,\"nodes\":%d,\"ranksPerNode\":%d,\"channels\":%d,\"treeDepth\":%d,"
        "\"links\":{\"intraLatUs\":%g,\"intraGBs\":%g,\"interLatUs\":%g,\"interGBs\":%g,\"nics\":%d,"
        "\"reduceGBs\":%g},\n\"results\":[",
        sim.nranks(), sim.nodes(), sim.ranksPerNode(), sim.channels(), sim.treeDepth(), l.intraLatUs, l.intraGBs,
        l.interLatUs, l.interGBs, l.nicsPerNode, l.reduceGBs);
    return;
  }
  std::printf("# weft-sim: SIMULATED AllReduce times (a model of the network, not a measurement)\n");
  std::printf("# %d ranks = %d nodes x %d, %d channels, tree depth %d\n", sim.nranks(), sim.nodes(), sim.ranksPerNode(),
              sim.channels(), sim.treeDepth());
  std::printf("# links: intra %.2f us %.1f GB/s; inter %.2f us %.1f GB/s x %d NIC(s); reduce %.1f GB/s\n", l.intraLatUs,
              l.intraGBs, l.interLatUs, l.interGBs, l.nicsPerNode, l.reduceGBs);
  std::printf("%14s  %-16s %16s %14s %12s  %s\n", "bytes", "algorithm", "simulated_us", "model_us", "operations",
              "schedule");
}

void printResult(const SimResult& r, const Options& o, bool first) {
  const char* name = weft::tuning::modelAlgoName(r.algo);
  const std::string schedule = r.note + (r.nodePeriodic ? " (node-periodic)" : "");
  if (o.csv) {
    if (r.ran)
      std::printf("%lld,%s,%.3f,%.3f,%lld,\"%s\",%d\n", static_cast<long long>(r.bytes), name, r.simulatedUs, r.modelUs,
                  static_cast<long long>(r.operations), r.note.c_str(), r.nodePeriodic ? 1 : 0);
    else
      std::printf("%lld,%s,,,0,\"%s\",0\n", static_cast<long long>(r.bytes), name, r.note.c_str());
  } else if (o.json) {
    std::printf(
        "%s\n{\"bytes\":%lld,\"algorithm\":\"%s\",\"ran\":%s,\"simulatedUs\":%.3f,\"modelUs\":%.3f,"
        "\"operations\":%lld,\"weftSchedule\":%s,\"nodePeriodic\":%s,\"note\":\"%s\"}",
        first ? "" : ",", static_cast<long long>(r.bytes), name, r.ran ? "true" : "false", r.simulatedUs, r.modelUs,
        static_cast<long long>(r.operations), r.weftSchedule ? "true" : "false", r.nodePeriodic ? "true" : "false",
        r.note.c_str());
  } else if (r.ran) {
    std::printf("%14lld  %-16s %16.2f %14.2f %12lld  %s\n", static_cast<long long>(r.bytes), name, r.simulatedUs,
                r.modelUs, static_cast<long long>(r.operations), schedule.c_str());
  } else {
    std::printf("%14lld  %-16s %16s %14s %12s  not simulated: %s\n", static_cast<long long>(r.bytes), name, "-", "-",
                "-", r.note.c_str());
  }
}

int fail(const Status& s) {
  std::fprintf(stderr, "weft-sim: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--csv" || flag == "--json") {
      (flag == "--csv" ? o.csv : o.json) = true;
      continue;
    }
    if (flag == "-h" || flag == "--help" || i + 1 >= argc) return usage(argv[0]);
    auto known = parseFlag(flag, argv[++i], &o);
    if (!known.ok()) return fail(known.status());
    if (!known.value()) return usage(argv[0]);
  }
  if (o.csv && o.json) return fail(errorStatus(ncclInvalidArgument, "--csv and --json: choose one"));
  if (o.algos.empty()) o.algos = parseAlgos("all").value();
  auto host = hostTopology(o);
  if (!host.ok()) return fail(host.status());
  const int perNode = static_cast<int>(host.value().nodesOf(weft::graph::NodeType::kGpu).size());
  if (o.ranks > 0) {
    if (perNode == 0 || o.ranks % perNode != 0)
      return fail(
          errorStatus(ncclInvalidArgument, "--ranks %d is not a multiple of the %d ranks per node", o.ranks, perNode));
    o.config.nodes = o.ranks / perNode;
  }
  if (!o.topoFile.empty()) {
    const weft::tuning::LinkFigures fromFile = weft::sim::figuresFromTopology(host.value(), o.config.links);
    if (!o.linksGiven[0]) o.config.links.intraGBs = fromFile.intraGBs;
    if (!o.linksGiven[1]) o.config.links.interGBs = fromFile.interGBs;
    if (!o.linksGiven[2]) o.config.links.nicsPerNode = fromFile.nicsPerNode;
  }
  auto sim = Simulator::create(host.value(), o.config);
  if (!sim.ok()) return fail(sim.status());
  printHeader(sim.value(), o);
  const auto start = std::chrono::steady_clock::now();
  bool first = true;
  for (int64_t bytes : o.sizes)
    for (ModelAlgo algo : o.algos) {
      printResult(sim.value().allReduce(algo, bytes), o, first);
      first = false;
      std::fflush(stdout);
    }
  if (o.json) std::printf("]}\n");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "weft-sim: %d ranks, %zu sizes x %zu algorithms simulated in %.2f s\n", sim.value().nranks(),
               o.sizes.size(), o.algos.size(), seconds);
  return 0;
}
