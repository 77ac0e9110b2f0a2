// A cheap identity of a model file's contents, for caches that outlive the
// process (the prefix cache's disk tier): two files with equal identities are
// taken to hold the same weights.
//
// The identity hashes the file's size, its first and last MiB (the GGUF
// header, metadata and tensor table; the last tensor's data) and eight
// 64 KiB samples spread evenly between them. A file rewritten with other
// weights of the same size and layout changes the sampled bytes unless the
// changes all fall outside the samples, which a retrained or requantized
// model does not do. Reads at most 3 MiB.
//
// Thread-safety: a pure function of the file; blocking (file I/O).
#pragma once

#include <cstdint>
#include <string>

namespace spate {

// 0 when the file cannot be read (std::runtime_error is not thrown: callers
// then run without a persistent cache).
uint64_t model_file_identity(const std::string& path);

}  // namespace spate
