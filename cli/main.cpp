// spate: one binary, several subcommands.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"

namespace {

void print_usage() {
  std::fprintf(stderr,
               "usage: spate <command> [options]\n"
               "commands:\n"
               "  serve      the OpenAI-compatible HTTP/WebSocket server\n"
               "  generate   offline batched inference: JSONL prompts on stdin, JSONL results on stdout\n"
               "  tokenize   print the token ids of stdin as a JSON array\n"
               "  perplexity a model's perplexity over a text file (as llama-perplexity)\n"
               "  version    print the version\n"
               "run 'spate <command> --help' for the options of a command\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage();
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "serve") return spate::cli::run_serve(argc - 1, argv + 1);
  if (cmd == "generate") return spate::cli::run_generate(argc - 1, argv + 1);
  if (cmd == "tokenize") return spate::cli::run_tokenize(argc - 1, argv + 1);
  if (cmd == "perplexity") return spate::cli::run_perplexity(argc - 1, argv + 1);
  if (cmd == "version" || cmd == "--version") return spate::cli::run_version(argc - 1, argv + 1);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    print_usage();
    return 0;
  }
  std::fprintf(stderr, "spate: unknown command '%s'\n", cmd.c_str());
  print_usage();
  return 2;
}
