// The models `spate serve` can serve, read once at start-up: each --model
// (repeatable), every *.gguf of --models-dir under its file stem, and the
// config file's model sections:
//
//   [model.gemma]
//   path = /models/gemma-3-270m-it-Q4_K_M.gguf
//   chat-template = /etc/spate/gemma.jinja
//   max-model-len = 8192
//   kv-cache-memory = 512MiB
//   speculative-config = {"method": "ngram", "num_speculative_tokens": 4}
//   pooling = mean
//   pinned = true
//   lora-modules = sql=/adapters/sql-gemma.gguf   (repeatable: adapters bound to this model)
//
// A section names a model id; it adds the model (path required) or, for an
// id --models-dir or --model already has, sets that model's options. Options a
// section does not set come from the command line. Each file's GGUF header
// is read: a file that is not a valid GGUF is listed with its error (and
// never loaded); it never stops the others. Files are opened without blocking
// (util/regular_file.h): a FIFO or a symbolic link loop named *.gguf is such a
// file.
//
// Each --lora-modules adapter is bound to a base at start-up: the model its
// base_model_name or section names (it must fit), else the one served model
// it fits by the headers (architecture, tensor shapes, --max-lora-rank:
// lora_fits_base in model/lora.h). An adapter that cannot be read or fits no
// model or several stops start-up.
//
// With one model and no --models-dir or section, the model is pinned (loaded
// before /ready, never unloaded) and named by --served-model-name: the
// single-model server.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli/cli_options.h"
#include "server/model_registry.h"
#include "server/serve_options.h"

namespace spate::cli {

// One servable model: its spec and the options it loads with.
struct catalog_model {
  model_spec spec;
  model_options model;    // the command line's, with the section's kv-cache-memory and max-model-len
  engine_options engine;  // the command line's, with the section's speculative-config
  serve_options serve;    // the command line's, with the section's chat-template and pooling
};

// "model.NAME.KEY" = value pairs of the config file (its unregistered options).
using section_options = std::vector<std::pair<std::string, std::string>>;

struct catalog_inputs {
  std::vector<std::string> model_paths;  // --model, in order (empty: the default model unless --models-dir)
  std::string models_dir;                // --models-dir
  section_options sections;
  const model_options* model = nullptr;
  const engine_options* engine = nullptr;
  const serve_options* serve = nullptr;
};

// Fills out. Returns "" or the error that stops start-up (an unreadable
// --models-dir, two models with one id, a section without a path, an
// unknown section key or a bad value, --served-model-name with several models,
// an adapter that cannot be bound).
std::string collect_models(const catalog_inputs& in, std::vector<catalog_model>& out);

// Whether this is the single-model server (see above).
bool single_model(const catalog_inputs& in);

}  // namespace spate::cli
