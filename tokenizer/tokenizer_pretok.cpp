#include "tokenizer/tokenizer_pretok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace spate::detail {

namespace {

// The GPT-2 pre-tokenizer: contractions, letters, numbers, other symbols, each with an optional
// leading space, and whitespace that is not followed by a non-space (the last space of a run
// stays with the following word). The "\s+" tail alternative of the original regex is not needed:
// unmatched stretches are kept as pieces anyway.
constexpr const char* k_gpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3 (tiktoken cl100k-style); case-insensitive contractions spelled out as classes so that
// Unicode case folding (e.g. U+017F LONG S) cannot widen them.
constexpr const char* k_llama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2 / StableLM2: as Llama 3 but single digits.
constexpr const char* k_qwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Mistral Tekken: upper-then-lower letter runs.
constexpr const char* k_tekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o (o200k) / Llama 4.
constexpr const char* k_gpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// BLOOM / Poro / GPT-3 Finnish: split before a space and around punctuation.
constexpr const char* k_bloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";

// DeepSeek LLM: cased letters of the listed scripts (explicit code point ranges).
constexpr const char* k_deepseek_llm_letters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
// ASCII and full-width punctuation/symbols, curly quotes, ideographic space and full stop.
constexpr const char* k_deepseek_llm_punct =
    R"(\s?[\x{21}-\x{2F}\x{3A}-\x{7E}\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
// CJK unified ideographs (and everything from U+0800 up to them), Hangul syllables.
constexpr const char* k_deepseek_cjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

bool any_of(std::string_view s, std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    if (s == n) return true;
  }
  return false;
}

}  // namespace

pretok_config pretok_config_for(std::string_view pre) {
  pretok_config c;
  if (pre.empty() || pre == "default") {
    // llama.cpp's fallback for BPE vocabularies without a known pre-tokenizer (e.g. GPT-NeoX).
    c.patterns = {R"([\p{P}\$\+<=>\^~\|]+)", k_gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  } else if (any_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    c.patterns = {k_llama3};
    c.ignore_merges = true;
  } else if (any_of(pre, {"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"})) {
    c.patterns = {k_llama3};
  } else if (pre == "deepseek-llm") {
    c.patterns = {"[\r\n]", k_deepseek_llm_letters, k_deepseek_llm_punct, R"(\s+$)", k_deepseek_cjk, R"(\p{N}+)"};
  } else if (pre == "deepseek-coder") {
    c.patterns = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", k_deepseek_cjk, R"(\p{N})"};
  } else if (pre == "falcon") {
    c.patterns = {R"([\p{P}\$\+<=>\^~\|`]+)", k_gpt2, "[0-9][0-9][0-9]"};
  } else if (any_of(pre, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    c.patterns = {R"(\p{N})", k_gpt2};
  } else if (any_of(pre, {"gpt-2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es",
                          "jina-v2-de", "jina-v2-code", "roberta-bpe", "gigachat", "exaone4", "trillion"})) {
    c.patterns = {k_gpt2};
  } else if (any_of(pre, {"qwen2", "stablelm2", "deepseek-r1-qwen", "megrez", "hunyuan"})) {
    c.patterns = {k_qwen2};
  } else if (any_of(pre, {"poro-chat", "bloom", "gpt3-finnish"})) {
    c.patterns = {k_bloom};
  } else if (pre == "viking") {
    c.patterns = {k_bloom, R"(\p{N})"};
  } else if (pre == "tekken") {
    c.patterns = {k_tekken};
    c.ignore_merges = true;
  } else if (any_of(pre, {"gpt-4o", "llama4"})) {
    c.patterns = {k_gpt4o};
  } else {
    throw std::runtime_error("tokenizer: unsupported pre-tokenizer tokenizer.ggml.pre='" + std::string(pre) +
                             "' (supported: default, gpt-2, llama3, smollm, starcoder, refact, falcon, mpt, "
                             "deepseek-llm, deepseek-coder, qwen2, stablelm2, command-r, tekken, gpt-4o, bloom, ...)");
  }
  return c;
}

struct regex_splitter::compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~compiled() {
    if (code) pcre2_code_free(code);
  }
};

regex_splitter::regex_splitter(const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw std::runtime_error("tokenizer: cannot compile pre-tokenizer regex at offset " + std::to_string(err_off) +
                               ": " + reinterpret_cast<const char*>(msg));
    }
    c->jit = pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE) == 0;
    patterns_.push_back(std::move(c));
  }
}

regex_splitter::~regex_splitter() = default;

namespace {

// Per-thread PCRE2 scratch: a JIT stack large enough for long whitespace/letter runs and a match
// context using it. Created on first use in each thread.
struct pcre2_scratch {
  pcre2_jit_stack* jit_stack = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_scratch() {
    mctx = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (mctx && jit_stack) pcre2_jit_stack_assign(mctx, nullptr, jit_stack);
  }
  ~pcre2_scratch() {
    if (mctx) pcre2_match_context_free(mctx);
    if (jit_stack) pcre2_jit_stack_free(jit_stack);
  }
};

pcre2_scratch& scratch() {
  thread_local pcre2_scratch s;
  return s;
}

inline size_t utf8_char_len(unsigned char b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  return 4;
}

}  // namespace

void regex_splitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  std::vector<std::string_view> cur{text}, next;
  auto& s = scratch();
  for (const auto& pat : patterns_) {
    next.clear();
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
        pcre2_match_data_create_from_pattern(pat->code, nullptr), pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    for (std::string_view piece : cur) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t start = 0, emitted = 0;
      while (start < piece.size()) {
        int rc = pcre2_match(pat->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, md.get(), s.mctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          // Retry this one match with the interpreter (heap-based backtracking).
          rc = pcre2_match(pat->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md.get(),
                           nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          throw std::runtime_error(std::string("tokenizer: pre-tokenizer regex failed: ") +
                                   reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t m0 = ov[0], m1 = ov[1];
        if (m1 <= m0) {
          // Empty match: not a split point; step over one character.
          if (m0 >= piece.size()) break;
          start = m0 + utf8_char_len(static_cast<unsigned char>(piece[m0]));
          continue;
        }
        if (m0 > emitted) next.push_back(piece.substr(emitted, m0 - emitted));
        next.push_back(piece.substr(m0, m1 - m0));
        emitted = start = m1;
      }
      if (emitted < piece.size()) next.push_back(piece.substr(emitted));
    }
    cur.swap(next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

}  // namespace spate::detail
