#include "kernels/ggml_type.h"

namespace spate::kernels {

std::optional<type_traits> traits_of(uint32_t raw) {
  switch (raw) {
    case 0: return type_traits{"F32", 1, 4, true};
    case 1: return type_traits{"F16", 1, 2, true};
    case 2: return type_traits{"Q4_0", 32, 18, true};
    case 3: return type_traits{"Q4_1", 32, 20, true};
    case 6: return type_traits{"Q5_0", 32, 22, true};
    case 7: return type_traits{"Q5_1", 32, 24, true};
    case 8: return type_traits{"Q8_0", 32, 34, true};
    case 9: return type_traits{"Q8_1", 32, 36, false};
    case 10: return type_traits{"Q2_K", 256, 84, true};
    case 11: return type_traits{"Q3_K", 256, 110, true};
    case 12: return type_traits{"Q4_K", 256, 144, true};
    case 13: return type_traits{"Q5_K", 256, 176, true};
    case 14: return type_traits{"Q6_K", 256, 210, true};
    case 15: return type_traits{"Q8_K", 256, 292, false};
    case 16: return type_traits{"IQ2_XXS", 256, 66, false};
    case 17: return type_traits{"IQ2_XS", 256, 74, false};
    case 18: return type_traits{"IQ3_XXS", 256, 98, false};
    case 19: return type_traits{"IQ1_S", 256, 50, false};
    case 20: return type_traits{"IQ4_NL", 32, 18, true};
    case 21: return type_traits{"IQ3_S", 256, 110, false};
    case 22: return type_traits{"IQ2_S", 256, 82, false};
    case 23: return type_traits{"IQ4_XS", 256, 136, false};
    case 24: return type_traits{"I8", 1, 1, false};
    case 25: return type_traits{"I16", 1, 2, false};
    case 26: return type_traits{"I32", 1, 4, false};
    case 27: return type_traits{"I64", 1, 8, false};
    case 28: return type_traits{"F64", 1, 8, false};
    case 29: return type_traits{"IQ1_M", 256, 56, false};
    case 30: return type_traits{"BF16", 1, 2, true};
    case 34: return type_traits{"TQ1_0", 256, 54, false};
    case 35: return type_traits{"TQ2_0", 256, 66, false};
    case 39: return type_traits{"MXFP4", 32, 17, true};
    default: return std::nullopt;
  }
}

const char* type_name(uint32_t raw) {
  static thread_local char buf[32];
  if (auto t = traits_of(raw)) return t->name;
  __builtin_snprintf(buf, sizeof buf, "type#%u", raw);
  return buf;
}

}  // namespace spate::kernels
