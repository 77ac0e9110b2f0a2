// Command-line parsing shared by the perf/bench tools.
#pragma once

#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

namespace spate::perf {

// Parses argv into vm by desc. Returns the exit code when the tool should
// stop: 2 after printing "<tool>: <error>" to stderr for a bad argument, 0
// after printing desc to stdout for --help (when desc has a "help" option).
// std::nullopt: go on.
inline std::optional<int> parse_args(const char* tool, int argc, char** argv,
                                     const boost::program_options::options_description& desc,
                                     boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return 2;
  }
  if (desc.find_nothrow("help", false) != nullptr && vm.count("help") > 0) {
    std::cout << desc << "\n";
    return 0;
  }
  return std::nullopt;
}

}  // namespace spate::perf
