#include "tuning/tuner_plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstring>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/params.h"
#include "common/plugin_lib.h"
#include "tuning/tuner_tables.h"

namespace weft::tuning {

struct TunerSession::Library {
  std::string name;  // the table's name
  std::string file;
  int version = 0;
  const weftTuner_v2_t* v2 = nullptr;
  const weftTuner_v3_t* v3 = nullptr;
  const weftTuner_v4_t* v4 = nullptr;
};

namespace {

constexpr int kOldest = 2;
constexpr int kNewest = 4;

std::string symbolOf(int version) { return strFormat("ncclTunerPlugin_v%d", version); }

int newestExported(void* handle, int from, int to) {
  for (int v = to; v >= from; --v)
    if (dlsym(handle, symbolOf(v).c_str()) != nullptr) return v;
  return 0;
}

// Why a library that opened holds no table Weft can use.
std::string missingTable(void* handle, const std::string& file) {
  if (int newer = newestExported(handle, kNewest + 1, kNewest + 20))
    return strFormat("%s exports only ncclTunerPlugin_v%d, newer than the newest Weft loads (v%d, NCCL 2.27)",
                     file.c_str(), newer, kNewest);
  if (dlsym(handle, "ncclTunerPlugin_v1") != nullptr)
    return strFormat("%s exports only ncclTunerPlugin_v1, older than the oldest Weft loads (v%d)", file.c_str(),
                     kOldest);
  return strFormat("%s exports no ncclTunerPlugin_v%d..v%d table", file.c_str(), kOldest, kNewest);
}

// The library's newest table, or why there is none (in *why).
bool takeTable(void* handle, const std::string& file, TunerSession::Library* lib, std::string* why) {
  lib->version = newestExported(handle, kOldest, kNewest);
  if (lib->version == 0) {
    *why = missingTable(handle, file);
    return false;
  }
  void* table = dlsym(handle, symbolOf(lib->version).c_str());
  // The three versions share name, init and destroy at the same offsets.
  lib->v2 = lib->version == 2 ? static_cast<const weftTuner_v2_t*>(table) : nullptr;
  lib->v3 = lib->version == 3 ? static_cast<const weftTuner_v3_t*>(table) : nullptr;
  lib->v4 = lib->version == 4 ? static_cast<const weftTuner_v4_t*>(table) : nullptr;
  const char* name = static_cast<const weftTuner_v2_t*>(table)->name;
  lib->name = name != nullptr ? name : "unnamed";
  lib->file = file;
  return true;
}

// The libraries to look in (name, and the kind its bare name expands with),
// and whether the user asked for one.
struct Setting {
  std::vector<std::pair<std::string, const char*>> names;
  bool requested = false;
};

Setting tunerSetting() {
  const std::string setting = param::tunerPlugin();
  if (strcasecmp(setting.c_str(), "none") == 0) return {{}, true};
  if (!setting.empty()) return {{{setting, "tuner"}}, true};
  // Not set: libnccl-tuner.so, then the network plugin's library (a plugin
  // may carry both tables, as NCCL allows).
  Setting out{{{"libnccl-tuner.so", "tuner"}}, false};
  const std::string net = param::netPlugin();
  if (net.empty()) out.names.emplace_back("libnccl-net.so", "net");
  if (!net.empty() && strcasecmp(net.c_str(), "none") != 0) out.names.emplace_back(net.substr(0, net.find(',')), "net");
  return out;
}

struct Loaded {
  std::unique_ptr<TunerSession::Library> library;
  std::string problem;  // why a plugin asked for is not used
};

Loaded loadLibrary() {
  const Setting setting = tunerSetting();
  std::string failures;
  for (const auto& [name, kind] : setting.names) {
    std::string file, why;
    void* handle = openPluginLibrary(name, kind, &file, &why);
    if (handle == nullptr) {
      failures += strFormat("%s%s", failures.empty() ? "" : "; ", why.c_str());
      continue;
    }
    auto lib = std::make_unique<TunerSession::Library>();
    if (takeTable(handle, file, lib.get(), &why)) {
      WEFT_INFO(log::kTuning | log::kInit, "TUNER/Plugin: loaded %s from %s (ncclTunerPlugin_v%d)", lib->name.c_str(),
                file.c_str(), lib->version);
      return {std::move(lib), ""};
    }
    failures += strFormat("%s%s", failures.empty() ? "" : "; ", why.c_str());
  }
  if (!setting.requested || setting.names.empty()) {
    if (!setting.names.empty())
      WEFT_INFO(log::kTuning | log::kInit, "TUNER/Plugin: none found (%s); Weft's own tuning", failures.c_str());
    return {};
  }
  Loaded out;
  out.problem = strFormat("NCCL_TUNER_PLUGIN=%s cannot be used: %s", setting.names[0].first.c_str(), failures.c_str());
  WEFT_WARN("%s; Weft's own tuning is used", out.problem.c_str());
  return out;
}

const Loaded& processLibrary() {
  return loadOncePerSetting<Loaded>(param::tunerPlugin() + '\n' + param::netPlugin(), loadLibrary);
}

ncclResult_t initOf(const TunerSession::Library& lib, size_t nranks, size_t nnodes, void** context) {
  const auto logger = reinterpret_cast<weftTunerLogger_t>(&pluginLog);
  if (lib.v4) return lib.v4->init(nranks, nnodes, logger, context);
  if (lib.v3) return lib.v3->init(nranks, nnodes, logger, context);
  return lib.v2->init(nranks, nnodes, logger, context);
}

Algorithm algorithmOf(int ncclAlgo) { return ncclAlgo == kNcclAlgoTree ? Algorithm::kTree : Algorithm::kRing; }
Protocol protocolOf(int ncclProto) {
  return ncclProto == kNcclProtoLL ? Protocol::kLL : ncclProto == kNcclProtoLL128 ? Protocol::kLL128 : Protocol::kSimple;
}

// The cheapest entry Weft can run, after the plugin's edits.
TunerAnswer cheapest(const float (&table)[kNcclNumAlgorithms][kNcclNumProtocols], const TunerCosts& offered) {
  TunerAnswer answer;
  float best = 0.0f;
  for (int a = 0; a < kNcclNumAlgorithms; ++a)
    for (int p = 0; p < kNcclNumProtocols; ++p) {
      if (!offered.runnable(a, p) || table[a][p] < 0.0f) continue;
      if (answer.decided && table[a][p] >= best) continue;
      answer = TunerAnswer{true, algorithmOf(a), protocolOf(p), 0};
      best = table[a][p];
    }
  return answer;
}

TunerAnswer askTable(const TunerSession::Library& lib, void* context, int func, size_t bytes, int pipeOps,
                     const TunerCosts& offered, ncclResult_t* rc) {
  float table[kNcclNumAlgorithms][kNcclNumProtocols];
  std::memcpy(table, offered.us, sizeof table);
  int nChannels = 0;
  float** cast = reinterpret_cast<float**>(table);
  *rc = lib.v4 ? lib.v4->getCollInfo(context, func, bytes, pipeOps, cast, kNcclNumAlgorithms, kNcclNumProtocols, 0,
                                     &nChannels)
               : lib.v3->getCollInfo(context, func, bytes, pipeOps, cast, kNcclNumAlgorithms, kNcclNumProtocols,
                                     &nChannels);
  TunerAnswer answer;
  if (std::memcmp(table, offered.us, sizeof table) != 0) answer = cheapest(table, offered);
  answer.nChannels = nChannels > 0 ? nChannels : 0;
  return answer;
}

TunerAnswer askDirect(const TunerSession::Library& lib, void* context, int func, size_t bytes, int pipeOps,
                      const TunerCosts& offered, ncclResult_t* rc) {
  int algorithm = -1, protocol = -1, nChannels = 0;
  *rc = lib.v2->getCollInfo(context, func, bytes, 0, 0, pipeOps, &algorithm, &protocol, &nChannels);
  TunerAnswer answer;
  answer.nChannels = nChannels > 0 ? nChannels : 0;
  if (algorithm < 0 || protocol < 0) return answer;
  if (algorithm >= kNcclNumAlgorithms || protocol >= kNcclNumProtocols || !offered.runnable(algorithm, protocol)) {
    WEFT_INFO(log::kTuning, "tuner %s chose algorithm %d protocol %d, which Weft cannot run for this call: ignored",
              lib.name.c_str(), algorithm, protocol);
    return answer;
  }
  answer.decided = true;
  answer.algo = algorithmOf(algorithm);
  answer.proto = protocolOf(protocol);
  return answer;
}

}  // namespace

TunerCosts::TunerCosts() {
  for (auto& row : us)
    for (float& cost : row) cost = kNcclCostIgnore;
}

void TunerCosts::offer(Algorithm algo, Protocol proto, double estimateUs) {
  const int a = algo == Algorithm::kTree ? kNcclAlgoTree : algo == Algorithm::kRing ? kNcclAlgoRing : -1;
  const int p = proto == Protocol::kLL      ? kNcclProtoLL
                : proto == Protocol::kLL128 ? kNcclProtoLL128
                : proto == Protocol::kSimple ? kNcclProtoSimple
                                             : -1;
  if (a < 0 || p < 0 || estimateUs < 0.0) return;
  us[a][p] = static_cast<float>(estimateUs);
}

int ncclFuncOf(CollKind coll) {
  switch (coll) {
    case CollKind::kBroadcast: return 0;
    case CollKind::kReduce: return 1;
    case CollKind::kAllGather: return 2;
    case CollKind::kReduceScatter: return 3;
    default: return 4;
  }
}

std::string TunerSession::problem() { return processLibrary().problem; }

std::unique_ptr<TunerSession> TunerSession::open(size_t nranks, size_t nnodes) {
  const Library* lib = processLibrary().library.get();
  if (lib == nullptr) return nullptr;
  void* context = nullptr;
  const ncclResult_t rc = initOf(*lib, nranks, nnodes, &context);
  if (rc != ncclSuccess) {
    WEFT_WARN("tuner plugin %s (%s): init(%zu ranks, %zu nodes) returned %s; Weft's own tuning is used",
              lib->name.c_str(), lib->file.c_str(), nranks, nnodes, resultName(rc));
    return nullptr;
  }
  return std::unique_ptr<TunerSession>(new TunerSession(lib, context));
}

TunerSession::~TunerSession() {
  const auto destroy = library_->v4   ? library_->v4->destroy
                       : library_->v3 ? library_->v3->destroy
                                      : library_->v2->destroy;
  if (destroy != nullptr) destroy(context_);
}

const std::string& TunerSession::name() const { return library_->name; }

TunerAnswer TunerSession::ask(CollKind coll, size_t bytes, int numPipeOps, const TunerCosts& offered) const {
  ncclResult_t rc = ncclSuccess;
  const int func = ncclFuncOf(coll);
  TunerAnswer answer = library_->v2 ? askDirect(*library_, context_, func, bytes, numPipeOps, offered, &rc)
                                    : askTable(*library_, context_, func, bytes, numPipeOps, offered, &rc);
  if (rc == ncclSuccess) return answer;
  WEFT_INFO(log::kTuning, "tuner %s: getCollInfo(%s, %zu bytes) returned %s; Weft's choice stands",
            library_->name.c_str(), collKindName(coll), bytes, resultName(rc));
  return TunerAnswer{};
}

}  // namespace weft::tuning
