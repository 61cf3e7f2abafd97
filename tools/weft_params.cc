// weft-params: lists every environment variable Weft reads.
//   weft-params             name, default and meaning, one per line
//   weft-params --markdown  docs/environment.md
#include <cstdio>
#include <cstring>

#include "common/params.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--markdown") == 0) {
    std::fputs(weft::param::markdownTable().c_str(), stdout);
    return 0;
  }
  for (const weft::param::Info& info : weft::param::all())
    std::printf("%-26s %-7s default %-12s %s\n", info.name, info.type,
                info.defaultText.empty() ? "(unset)" : info.defaultText.c_str(), info.doc);
  return 0;
}
