// `spate tokenize`: prints the token ids of stdin as one JSON array on one line.
#include <boost/program_options.hpp>
#include <iostream>
#include <iterator>
#include <spdlog/spdlog.h>
#include <string>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "model/gguf_file.h"
#include "model/model_paths.h"
#include "model/tokenizer_gguf.h"
#include "tokenizer/tokenizer.h"

namespace spate::cli {

namespace po = boost::program_options;

int run_tokenize(int argc, char** argv) {
  std::string model_path;
  std::string log_level = "warn";
  bool special = false;
  po::options_description desc("spate tokenize: text on stdin -> JSON array of token ids on stdout");
  desc.add_options()("model", po::value(&model_path), "GGUF model file (default: the cached SmolLM2-135M-Instruct Q4_1)")
      ("special", po::bool_switch(&special), "add BOS/EOS as the model asks and parse special-token text")
      ("log-level", po::value(&log_level)->default_value("warn"), "log level")
      ("help,h", "show this help");
  po::variables_map vm;
  if (int rc = parse_command_line("tokenize", argc, argv, desc, vm); rc >= 0) return rc;
  if (model_path.empty()) model_path = default_model_path();
  constexpr size_t k_max_input_bytes = 64u << 20;
  std::string text;
  text.reserve(4096);
  char buf[65536];
  while (std::cin.read(buf, sizeof buf) || std::cin.gcount() > 0) {
    text.append(buf, static_cast<size_t>(std::cin.gcount()));
    if (text.size() > k_max_input_bytes) {
      std::cerr << "spate tokenize: input is larger than " << (k_max_input_bytes >> 20) << " MiB\n";
      return 1;
    }
  }
  try {
    auto file = gguf_file::open(model_path);
    const tokenizer tok(vocab_spec_from_gguf(*file));
    const auto ids = tok.encode(text, special);
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "]\n";
    std::cout << out;
  } catch (const std::exception& e) {
    std::cerr << "spate tokenize: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace spate::cli
