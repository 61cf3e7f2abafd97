// Typed access to the parameter registry in param_table.inc.
//
// Values are read from the environment on every call, so set-up code sees the
// current environment; hot paths copy what they need into their own state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::param {

#define WEFT_PARAM_INT(accessor, name, def, doc) int64_t accessor();
#define WEFT_PARAM_STR(accessor, name, def, doc) std::string accessor();
#include "common/param_table.inc"
#undef WEFT_PARAM_INT
#undef WEFT_PARAM_STR

struct Info {
  const char* name;
  const char* type;  // "int" or "string"
  std::string defaultText;
  const char* doc;
};

// Every registered parameter, in table order.
const std::vector<Info>& all();

// The raw value of a registered parameter, after configuration files; empty
// optional when unset.
std::optional<std::string> raw(const char* name);

// Parses an integer the way parameters do (decimal, 0x hex, k/m/g suffixes).
std::optional<int64_t> parseInt(const std::string& text);

// Renders docs/environment.md.
std::string markdownTable();

}  // namespace weft::param
