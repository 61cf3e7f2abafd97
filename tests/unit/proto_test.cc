// NCCL_PROTO parsing (NCCL's syntax: lists, ^ exclusion, per-collective
// entries, any case; unknown names are errors that name them) and the
// per-call protocol choice.
#include "tuning/proto.h"

#include <gtest/gtest.h>

namespace weft::tuning {
namespace {

constexpr CollKind kAllReduce = CollKind::kAllReduce;
constexpr CollKind kBroadcast = CollKind::kBroadcast;

ProtoFilter parsed(const std::string& text) {
  auto filter = ProtoFilter::parse(text);
  EXPECT_TRUE(filter.ok()) << text << ": " << filter.status().message();
  return filter.ok() ? filter.value() : ProtoFilter();
}

TEST(ProtoFilter, EmptyAllowsEverything) {
  const ProtoFilter f = parsed("");
  EXPECT_FALSE(f.explicitlySet());
  for (int p = 0; p < static_cast<int>(Protocol::kCount); ++p)
    EXPECT_TRUE(f.allows(kBroadcast, static_cast<Protocol>(p)));
}

TEST(ProtoFilter, ListIsCaseInsensitive) {
  const ProtoFilter f = parsed(" ll , SIMPLE");
  EXPECT_TRUE(f.explicitlySet());
  EXPECT_TRUE(f.allows(kAllReduce, Protocol::kLL));
  EXPECT_TRUE(f.allows(kAllReduce, Protocol::kSimple));
  EXPECT_FALSE(f.allows(kAllReduce, Protocol::kLL128));
}

TEST(ProtoFilter, CaretExcludes) {
  const ProtoFilter f = parsed("^LL128");
  EXPECT_TRUE(f.allows(kAllReduce, Protocol::kLL));
  EXPECT_TRUE(f.allows(kAllReduce, Protocol::kSimple));
  EXPECT_FALSE(f.allows(kAllReduce, Protocol::kLL128));
  EXPECT_EQ(f.onlyLL128(), CollKind::kCount);
}

TEST(ProtoFilter, PerCollectiveEntriesOverrideTheDefault) {
  const ProtoFilter f = parsed("Simple;AllReduce:LL;broadcast:^simple");
  EXPECT_TRUE(f.allows(kAllReduce, Protocol::kLL));
  EXPECT_FALSE(f.allows(kAllReduce, Protocol::kSimple));
  EXPECT_FALSE(f.allows(kBroadcast, Protocol::kSimple));
  EXPECT_TRUE(f.allows(kBroadcast, Protocol::kLL));
  EXPECT_FALSE(f.allows(CollKind::kAllGather, Protocol::kLL));
  EXPECT_TRUE(f.allows(CollKind::kAllGather, Protocol::kSimple));
}

TEST(ProtoFilter, UnknownProtocolIsAnErrorNamingIt) {
  auto f = ProtoFilter::parse("LL,LL256");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ncclInvalidArgument);
  EXPECT_NE(f.status().message().find("\"ll256\""), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("NCCL_PROTO"), std::string::npos);
}

TEST(ProtoFilter, UnknownCollectiveIsAnErrorNamingIt) {
  auto f = ProtoFilter::parse("allreduce:LL;alltoall:simple");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("\"alltoall\""), std::string::npos) << f.status().message();
}

TEST(ProtoFilter, OnlyLL128IsFound) {
  EXPECT_EQ(parsed("LL128").onlyLL128(), kAllReduce);
  EXPECT_EQ(parsed("simple;broadcast:ll128").onlyLL128(), kBroadcast);
  EXPECT_EQ(parsed("LL128,LL").onlyLL128(), CollKind::kCount);
}

ProtoInputs hostInputs(int64_t bytes, Algorithm algo = Algorithm::kRing) {
  ProtoInputs in;
  in.bytes = bytes;
  in.algo = algo;
  in.llPossible = true;
  in.llByDefault = true;
  return in;
}

TEST(ChooseProtocol, LLForSmallSimpleBeyondTheThreshold) {
  const ProtoFilter any;
  EXPECT_EQ(chooseProtocol(hostInputs(8), any).proto, Protocol::kLL);
  EXPECT_EQ(chooseProtocol(hostInputs(kLLMaxBytesRing), any).proto, Protocol::kLL);
  EXPECT_EQ(chooseProtocol(hostInputs(kLLMaxBytesRing + 1), any).proto, Protocol::kSimple);
  EXPECT_EQ(chooseProtocol(hostInputs(kLLMaxBytesOneShot, Algorithm::kOneShot), any).proto, Protocol::kLL);
  EXPECT_EQ(chooseProtocol(hostInputs(kLLMaxBytesOneShot + 1, Algorithm::kOneShot), any).proto, Protocol::kSimple);
}

TEST(ChooseProtocol, FilterForcesEitherWay) {
  EXPECT_EQ(chooseProtocol(hostInputs(64 << 20), parsed("LL")).proto, Protocol::kLL);
  EXPECT_EQ(chooseProtocol(hostInputs(8), parsed("^LL")).proto, Protocol::kSimple);
  EXPECT_EQ(chooseProtocol(hostInputs(8, Algorithm::kTree), parsed("LL")).proto, Protocol::kLL);
}

// LL128 has no figures in the model: it runs where NCCL_PROTO leaves it
// alone, or beside LL without Simple above LL's size bound; never by itself.
TEST(ChooseProtocol, LL128OnlyWhereNcclProtoLeavesNoPricedProtocol) {
  ProtoInputs in = hostInputs(8);
  in.ll128Possible = true;
  EXPECT_EQ(chooseProtocol(in, parsed("LL128")).proto, Protocol::kLL128);
  in.bytes = 64 << 20;
  EXPECT_EQ(chooseProtocol(in, parsed("LL128")).proto, Protocol::kLL128);
  EXPECT_EQ(chooseProtocol(in, parsed("LL,LL128")).proto, Protocol::kLL128);
  EXPECT_EQ(chooseProtocol(in, parsed("^Simple")).proto, Protocol::kLL128);
  EXPECT_EQ(chooseProtocol(in, ProtoFilter()).proto, Protocol::kSimple);
  EXPECT_EQ(chooseProtocol(in, parsed("Simple,LL128")).proto, Protocol::kSimple);
  in.bytes = kLLMaxBytesRing;
  EXPECT_EQ(chooseProtocol(in, parsed("LL,LL128")).proto, Protocol::kLL);
  EXPECT_EQ(chooseProtocol(in, ProtoFilter()).proto, Protocol::kLL);
  // Per collective: Broadcast alone under LL128.
  const ProtoFilter perColl = parsed("simple;broadcast:ll128");
  EXPECT_EQ(chooseProtocol(in, perColl).proto, Protocol::kSimple);
  in.coll = CollKind::kBroadcast;
  EXPECT_EQ(chooseProtocol(in, perColl).proto, Protocol::kLL128);
}

// Where LL128 cannot run (links that may split a line, the network, an
// algorithm without an LL128 form), asking for it alone gives Simple.
// Priced by the model (a tuning file gave it figures): the cheapest of the
// three protocols possible and allowed wins.
TEST(ChooseProtocol, PricedLL128WinsOnlyWhereCheapest) {
  ProtoInputs in = hostInputs(4096);
  in.ll128Possible = true;
  in.simpleUs = 3.0;
  in.llUs = 5.0;
  in.ll128Us = 2.0;
  ProtoChoice c = chooseProtocol(in, ProtoFilter());
  EXPECT_EQ(c.proto, Protocol::kLL128);
  EXPECT_NE(std::string(c.reason).find("model"), std::string::npos) << c.reason;
  in.ll128Us = 4.0;
  EXPECT_EQ(chooseProtocol(in, ProtoFilter()).proto, Protocol::kSimple);
  in.llUs = 1.0;
  EXPECT_EQ(chooseProtocol(in, ProtoFilter()).proto, Protocol::kLL);
  in.llUs = 5.0;
  in.ll128Us = 2.0;
  EXPECT_EQ(chooseProtocol(in, parsed("^LL128")).proto, Protocol::kSimple) << "excluded by NCCL_PROTO";
  EXPECT_EQ(chooseProtocol(in, parsed("Simple,LL128")).proto, Protocol::kLL128);
  in.ll128Possible = false;  // no kernel for the op, or links that split a line
  EXPECT_EQ(chooseProtocol(in, ProtoFilter()).proto, Protocol::kSimple);
  in.ll128Possible = true;
  in.ll128Us = -1;  // not priced (the built-in figures' never-wins is the planner's business): the old rules
  EXPECT_EQ(chooseProtocol(in, ProtoFilter()).proto, Protocol::kSimple);
}

TEST(ChooseProtocol, LL128AloneWhereImpossibleRunsSimple) {
  ProtoInputs in = hostInputs(8);
  in.ll128Possible = false;
  const ProtoChoice c = chooseProtocol(in, parsed("LL128"));
  EXPECT_EQ(c.proto, Protocol::kSimple);
  EXPECT_NE(std::string(c.reason).find("nothing"), std::string::npos) << c.reason;
  EXPECT_EQ(chooseProtocol(in, parsed("LL,LL128")).proto, Protocol::kLL);
}

TEST(ChooseProtocol, NoLLWhereImpossibleOrNotByDefault) {
  ProtoInputs in = hostInputs(8);
  in.llPossible = false;  // a link through the network
  EXPECT_EQ(chooseProtocol(in, parsed("LL")).proto, Protocol::kSimple);
  in = hostInputs(8);
  in.llByDefault = false;  // the cuda backend: only on request
  EXPECT_EQ(chooseProtocol(in, ProtoFilter()).proto, Protocol::kSimple);
  EXPECT_EQ(chooseProtocol(in, parsed("LL")).proto, Protocol::kLL);
}

}  // namespace
}  // namespace weft::tuning
