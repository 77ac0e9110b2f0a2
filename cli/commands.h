// The `spate` binary's subcommands. Each takes the arguments after its name
// and returns the process exit code. Errors go to stderr with a clear message.
#pragma once

namespace spate::cli {

int run_version(int argc, char** argv);
int run_tokenize(int argc, char** argv);
int run_perplexity(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_serve(int argc, char** argv);

}  // namespace spate::cli
