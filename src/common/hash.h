// Small non-cryptographic hashes and random numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft {

// 64-bit FNV-1a.
inline uint64_t hashBytes(const void* data, size_t len, uint64_t seed = 0xcbf29ce484222325ull) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < len; ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

inline uint64_t hashString(const std::string& s) { return hashBytes(s.data(), s.size()); }

// 64 random bits from the kernel; falls back to time and address mixing.
uint64_t randomU64();

// Identity of this machine: NCCL_HOSTID when set, else host name + boot id.
uint64_t hostHash();

// Identity of this process on its host (pid namespace aware).
uint64_t processHash();

// The physical machine (its kernel's boot id), whatever NCCL_HOSTID says:
// ranks that share it share its cores, even when they pose as separate hosts
// (network namespaces, containers, tests).
uint64_t machineHash();

}  // namespace weft
