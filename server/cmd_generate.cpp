#include <cstdio>

#include "server/commands.h"

namespace spate::cli {

int run_tokenize(int, char**) {
  std::fprintf(stderr, "spate tokenize: unavailable in this build\n");
  return 1;
}

int run_generate(int, char**) {
  std::fprintf(stderr, "spate generate: unavailable in this build\n");
  return 1;
}

}  // namespace spate::cli
