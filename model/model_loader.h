// Loads a GGUF model: file mapping, hyper-parameters, weights and tokenizer,
// and logs what it took the way vLLM and llama.cpp's servers do.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "tokenizer/tokenizer.h"
#include "kernels/isa.h"

namespace spate {

struct loaded_model {
  std::unique_ptr<gguf_file> file;  // owns the mapping the weights point into
  model_config config;
  model_weights weights;
  std::unique_ptr<tokenizer> tok;
  std::string chat_template;        // tokenizer.chat_template, may be empty
  double load_seconds = 0.0;
};

// The process's resident set size in bytes (/proc/self/statm; 0 if unreadable).
uint64_t resident_bytes();

// The memory the kernel says is available for new allocations without
// swapping (MemAvailable of /proc/meminfo), in bytes; 0 if unreadable.
uint64_t available_memory_bytes();

// Loading progress, reported at every 10%: percent and a description
// ("12/31 layers"). Runs on the loading thread.
using load_progress_fn = std::function<void(int percent, const std::string& what)>;

// Throws gguf_error / std::runtime_error with a message naming the file and
// problem; before any weight is touched, std::runtime_error when the weights'
// repacked copies (every level but scalar) would not fit the available memory. Logs "Loading weights: N% (...)" at every 10% and passes the same
// to on_progress.
std::unique_ptr<loaded_model> load_model(const std::string& path, kernels::isa_level level, const load_progress_fn& on_progress = {});

}  // namespace spate
