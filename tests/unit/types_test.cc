// Conversions of the storage types against values known exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "device/types.h"
#include "device/work.h"

namespace weft::device {
namespace {

// A repeat's signature (core/launch.cc): withCallSeq on the signature of
// an item gives the signature of the same item with the new sequence, past
// the field's 20 bits too; an unchecked item stays unchecked.
TEST(CallWord, WithCallSeqIsTheItemsSignatureAtThatSequence) {
  WorkItem item{};
  item.kind = WorkItem::Kind::kColl;
  item.checkCalls = true;
  item.coll.func = Func::kBroadcast;
  item.coll.dtype = DataType::kFloat32;
  item.coll.root = 3;
  item.coll.count = 1000;
  item.coll.seq = 7;
  const CallSignature first = itemSignature(item);
  for (uint64_t seq : {uint64_t{8}, uint64_t{kCallSeqMask}, uint64_t{kCallSeqMask} + 1, uint64_t{1} << 33}) {
    item.coll.seq = static_cast<uint32_t>(seq);
    EXPECT_EQ(withCallSeq(first.word, seq), itemSignature(item).word) << seq;
    EXPECT_NE(withCallSeq(first.word, seq), withCallSeq(first.word, seq + 1)) << seq;
  }
  item.checkCalls = false;
  EXPECT_EQ(withCallSeq(itemSignature(item).word, 9), 0u);
}

TEST(Half, RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    half_t h{static_cast<uint16_t>(bits)};
    float f = halfToFloat(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(floatToHalf(f).bits, h.bits) << "bits 0x" << std::hex << bits;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + 1.0f / 2048)), 1.0f);                // tie, even stays
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);  // tie, odd rounds up
  EXPECT_EQ(floatToHalf(65520.0f).bits, 0x7c00);                                // overflows to inf
  EXPECT_EQ(halfToFloat(floatToHalf(65519.0f)), 65504.0f);
}

TEST(Bfloat16, RoundTripsAndRounds) {
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(3.0f)), 3.0f);
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(1.0f + 1.0f / 256)), 1.0f);  // tie to even
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(NAN))));
}

TEST(Fp8, E4M3RoundTripsAndSaturates) {
  for (int bits = 0; bits < 256; ++bits) {
    fp8e4m3_t v{static_cast<uint8_t>(bits)};
    float f = fp8e4m3ToFloat(v);
    if (std::isnan(f)) continue;
    EXPECT_EQ(floatToFp8e4m3(f).bits, v.bits) << "bits " << bits;
  }
  EXPECT_EQ(fp8e4m3ToFloat(floatToFp8e4m3(1e6f)), 448.0f);
  EXPECT_EQ(fp8e4m3ToFloat(floatToFp8e4m3(-1e6f)), -448.0f);
}

TEST(Fp8, E5M2RoundTripsAndSaturates) {
  for (int bits = 0; bits < 256; ++bits) {
    fp8e5m2_t v{static_cast<uint8_t>(bits)};
    float f = fp8e5m2ToFloat(v);
    if (std::isnan(f) || std::isinf(f)) continue;
    EXPECT_EQ(floatToFp8e5m2(f).bits, v.bits) << "bits " << bits;
  }
  EXPECT_EQ(fp8e5m2ToFloat(floatToFp8e5m2(1e9f)), 57344.0f);
}

TEST(Arith, IntegersWrapInsteadOfOverflowing) {
  EXPECT_EQ(Arith<int8_t>::add(127, 1), -128);
  EXPECT_EQ(Arith<int8_t>::mul(16, 16), 0);
  EXPECT_EQ(Arith<int32_t>::divide(-7, 2), -3);  // truncation toward zero
}

}  // namespace
}  // namespace weft::device
