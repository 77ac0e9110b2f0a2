// llama.cpp's greedy tokens and raw top logits, for spate's reference
// fixtures (make_gpt_oss_quantized_fixture.py, make_lora_fixture.py). Built
// against a llama.cpp source tree's static libraries (see
// tests/reference/README.md); not part of spate's build.
//
// Usage: llama_greedy_dump MODEL.gguf N_GEN TOP_K [LORA.gguf] < prompts
//        llama_greedy_dump --quantize IN.gguf OUT.gguf FTYPE
//   the second form is `llama-quantize IN OUT FTYPE` (FTYPE as a number, 38
//   for MXFP4_MOE): llama_model_quantize with llama-quantize's default params.
//   stdin: one prompt per line, its token ids separated by spaces.
//   stdout: one JSON object per prompt:
//     {"prompt_ids": [...], "steps": [[[id, logit] x TOP_K], ...]}
//   step i holds the logits after prompt + the first i greedy tokens; the
//   greedy token of step i is steps[i][0][0] (ties: the lowest id).
//   N_GEN 0: no generation; steps[i] is the top of position i of the prompt,
//   decoded as one batch with logits at every position (teacher forcing).
// Decoding: the prompt as one batch, then one llama_decode per token; F16 KV
// cache, flash attention off, 2 threads, n_ctx 2048, no extra buffer types
// (0.3.36's AMX matmul crashes on AMX machines), LoRA scale 1.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--quantize") {
    llama_backend_init();
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = static_cast<llama_ftype>(std::atoi(argv[4]));
    return llama_model_quantize(argv[2], argv[3], &qp) == 0 ? 0 : 1;
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL N_GEN TOP_K [LORA] < prompts\n", argv[0]);
    return 2;
  }
  const int n_gen = std::atoi(argv[2]), top_k = std::atoi(argv[3]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.use_extra_bufts = false;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 2048;
  cp.n_batch = 2048;
  cp.n_ubatch = 512;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  if (argc > 4) {
    llama_adapter_lora* a = llama_adapter_lora_init(model, argv[4]);
    if (!a) return 1;
    float scale = 1.0f;
    if (llama_set_adapters_lora(ctx, &a, 1, &scale) != 0) return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::string line;
  std::vector<int> order(static_cast<size_t>(n_vocab));
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::vector<llama_token> toks;
    for (llama_token t; in >> t;) toks.push_back(t);
    if (toks.empty()) continue;
    llama_memory_clear(llama_get_memory(ctx), true);
    std::printf("{\"prompt_ids\": [");
    for (size_t i = 0; i < toks.size(); ++i) std::printf("%s%d", i ? ", " : "", toks[i]);
    std::printf("], \"steps\": [");
    auto top_of = [&](const float* l) {
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                        [&](int a, int c) { return l[a] > l[c] || (l[a] == l[c] && a < c); });
      std::printf("[");
      for (int j = 0; j < top_k; ++j) std::printf("%s[%d, %.5f]", j ? ", " : "", order[j], l[order[j]]);
      std::printf("]");
    };
    if (n_gen == 0) {
      llama_batch b = llama_batch_init(static_cast<int32_t>(toks.size()), 0, 1);
      b.n_tokens = static_cast<int32_t>(toks.size());
      for (int32_t i = 0; i < b.n_tokens; ++i) {
        b.token[i] = toks[static_cast<size_t>(i)];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
      }
      if (llama_decode(ctx, b) != 0) return 1;
      for (int32_t i = 0; i < b.n_tokens; ++i) {
        std::printf("%s", i ? ", " : "");
        top_of(llama_get_logits_ith(ctx, i));
      }
      llama_batch_free(b);
      std::printf("]}\n");
      std::fflush(stdout);
      continue;
    }
    std::vector<llama_token> cur = toks;
    for (int step = 0; step < n_gen; ++step) {
      llama_batch b = llama_batch_get_one(cur.data(), static_cast<int32_t>(cur.size()));
      if (llama_decode(ctx, b) != 0) return 1;
      std::printf("%s", step ? ", " : "");
      top_of(llama_get_logits_ith(ctx, -1));
      cur.assign(1, order[0]);
    }
    std::printf("]}\n");
    std::fflush(stdout);
  }
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
