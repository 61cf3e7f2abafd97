#include "tuning/proto.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace weft::tuning {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "LL,Simple" or "^LL128" -> mask of protocols.
Result<uint32_t> parseList(const std::string& text, const std::string& whole) {
  std::string list = trim(text);
  const bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list = list.substr(1);
  uint32_t mask = 0;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    name = lower(trim(name));
    if (name.empty()) continue;
    int found = -1;
    for (int p = 0; p < static_cast<int>(Protocol::kCount); ++p)
      if (name == lower(protocolName(static_cast<Protocol>(p)))) found = p;
    if (found < 0)
      return errorStatus(ncclInvalidArgument,
                         "NCCL_PROTO=\"%s\": unknown protocol \"%s\" (expected Simple, LL or LL128, optionally per "
                         "collective as allreduce:LL)",
                         whole.c_str(), name.c_str());
    mask |= 1u << found;
  }
  return exclude ? ~mask : mask;
}

Result<int> parseColl(const std::string& name, const std::string& whole) {
  for (int c = 0; c < static_cast<int>(CollKind::kCount); ++c)
    if (name == lower(collKindName(static_cast<CollKind>(c)))) return c;
  return errorStatus(ncclInvalidArgument,
                     "NCCL_PROTO=\"%s\": unknown collective \"%s\" (expected allreduce, allgather, reducescatter, "
                     "broadcast or reduce)",
                     whole.c_str(), name.c_str());
}

}  // namespace

const char* protocolName(Protocol proto) {
  switch (proto) {
    case Protocol::kLL: return "LL";
    case Protocol::kLL128: return "LL128";
    default: return "Simple";
  }
}

Result<ProtoFilter> ProtoFilter::parse(const std::string& text) {
  ProtoFilter filter;
  std::stringstream in(text);
  for (std::string entry; std::getline(in, entry, ';');) {
    entry = trim(entry);
    if (entry.empty()) continue;
    filter.set_ = true;
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      WEFT_ASSIGN_OR_RETURN(uint32_t mask, parseList(entry, text));
      for (uint32_t& m : filter.mask_) m = mask;
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(int index, parseColl(lower(trim(entry.substr(0, colon))), text));
    WEFT_ASSIGN_OR_RETURN(uint32_t mask, parseList(entry.substr(colon + 1), text));
    filter.mask_[index] = mask;
  }
  return filter;
}

CollKind ProtoFilter::onlyLL128() const {
  for (int c = 0; c < static_cast<int>(CollKind::kCount); ++c) {
    const CollKind coll = static_cast<CollKind>(c);
    if (allows(coll, Protocol::kLL128) && !allows(coll, Protocol::kSimple) && !allows(coll, Protocol::kLL)) return coll;
  }
  return CollKind::kCount;
}

ProtoChoice chooseProtocol(const ProtoInputs& in, const ProtoFilter& filter) {
  const bool simpleOk = filter.allows(in.coll, Protocol::kSimple);
  const bool llOk = filter.allows(in.coll, Protocol::kLL);
  const int64_t limit = in.algo == Algorithm::kOneShot ? kLLMaxBytesOneShot : kLLMaxBytesRing;
  if (in.ll128Possible && filter.allows(in.coll, Protocol::kLL128) && !simpleOk) {
    if (!llOk || !in.llPossible) return {Protocol::kLL128, "NCCL_PROTO leaves LL128"};
    if (in.bytes > limit) return {Protocol::kLL128, "NCCL_PROTO excludes Simple; LL128 above LL's size bound"};
    return {Protocol::kLL, "NCCL_PROTO excludes Simple; LL at this size"};
  }
  // LL128 priced (the model may choose it): the cheapest of the three.
  if (in.ll128Possible && filter.allows(in.coll, Protocol::kLL128) && in.ll128Us >= 0 && in.llByDefault &&
      in.simpleUs >= 0) {
    ProtoChoice best{Protocol::kSimple, "Simple is cheaper by the model"};
    double cost = in.simpleUs;
    if (in.llPossible && llOk && in.llUs >= 0 && in.llUs < cost) {
      best = {Protocol::kLL, "LL is cheaper by the model"};
      cost = in.llUs;
    }
    if (in.ll128Us < cost) best = {Protocol::kLL128, "LL128 is cheaper by the model"};
    return best;
  }
  if (!in.llPossible) {
    if (!simpleOk) return {Protocol::kSimple, "NCCL_PROTO allows nothing possible here (LL needs links within a node)"};
    return {Protocol::kSimple, "LL is not possible here"};
  }
  if (!llOk) return {Protocol::kSimple, simpleOk ? "NCCL_PROTO excludes LL" : "NCCL_PROTO allows nothing Weft runs"};
  if (!simpleOk) return {Protocol::kLL, "NCCL_PROTO excludes Simple"};
  if (!in.llByDefault) return {Protocol::kSimple, "LL only on request on this backend"};
  if (in.simpleUs >= 0 && in.llUs >= 0)
    return in.llUs < in.simpleUs ? ProtoChoice{Protocol::kLL, "LL is cheaper by the model"}
                                 : ProtoChoice{Protocol::kSimple, "Simple is cheaper by the model"};
  if (in.algo == Algorithm::kTree || in.bytes > limit) return {Protocol::kSimple, "Simple is faster at this size"};
  return {Protocol::kLL, "LL is faster at this size"};
}

}  // namespace weft::tuning
