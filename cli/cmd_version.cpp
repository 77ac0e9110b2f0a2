// `spate version`: prints the version and the kernel ISA this machine runs (always exit 0).
#include <cstdio>

#include "cli/commands.h"
#include "kernels/isa.h"

namespace spate::cli {

int run_version(int, char**) {
  std::printf("spate 0.1.0 (kernels: %s)\n", kernels::isa_name(kernels::detect_isa()));
  return 0;
}

}  // namespace spate::cli
