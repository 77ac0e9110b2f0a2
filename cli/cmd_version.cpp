#include <cstdio>

#include "kernels/isa.h"
#include "cli/commands.h"

namespace spate::cli {

int run_version(int, char**) {
  std::printf("spate 0.1.0 (kernels: %s)\n", kernels::isa_name(kernels::detect_isa()));
  return 0;
}

}  // namespace spate::cli
