#include "jinja/jinja_tojson.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {
namespace {

void append_escaped(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  char buf[16];
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t start = pos;
    const char32_t c = unicode::decode(s, pos);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c > 0xFFFF) {
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)),
                      static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      out.append(s.substr(start, pos - start));
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

class encoder {
 public:
  encoder(render_context& ctx, const json_options& o) : ctx_(ctx), o_(o) {}

  void encode(const value& v, int level) {
    if (out_.size() > ctx_.limits().max_string_bytes) ctx_.check_string(out_.size());
    switch (v.type()) {
      case kind::none: out_ += "null"; return;
      case kind::boolean: out_ += v.as_bool() ? "true" : "false"; return;
      case kind::integer: out_ += std::to_string(v.as_int()); return;
      case kind::floating: out_ += float_json(v.as_float()); return;
      case kind::string: append_escaped(out_, v.str(), o_.ensure_ascii); return;
      case kind::list:
      case kind::tuple: {
        const auto& items = v.seq().items;
        if (items.empty()) {
          out_ += "[]";
          return;
        }
        out_ += '[';
        newline(level + 1);
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i) {
            out_ += o_.item_sep;
            newline(level + 1);
          }
          encode(items[i], level + 1);
        }
        newline(level);
        out_ += ']';
        return;
      }
      case kind::dict: {
        const auto& d = v.dict_ref();
        if (d.items.empty()) {
          out_ += "{}";
          return;
        }
        std::vector<const std::pair<value, value>*> items;
        items.reserve(d.items.size());
        for (const auto& kv : d.items) items.push_back(&kv);
        if (o_.sort_keys)
          std::stable_sort(items.begin(), items.end(),
                           [&](const auto* a, const auto* b) { return py_less(a->first, b->first, ctx_); });
        out_ += '{';
        newline(level + 1);
        bool first = true;
        for (const auto* kv : items) {
          const value& k = kv->first;
          std::string key;
          switch (k.type()) {
            case kind::string: key = k.str(); break;
            case kind::floating: key = float_json(k.as_float()); break;
            case kind::boolean: key = k.as_bool() ? "true" : "false"; break;
            case kind::none: key = "null"; break;
            case kind::integer: key = std::to_string(k.as_int()); break;
            default: throw runtime_error("keys must be str, int, float, bool or None, not " + type_name(k));
          }
          if (!first) {
            out_ += o_.item_sep;
            newline(level + 1);
          }
          first = false;
          append_escaped(out_, key, o_.ensure_ascii);
          out_ += o_.key_sep;
          encode(kv->second, level + 1);
        }
        newline(level);
        out_ += '}';
        return;
      }
      default: throw runtime_error("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int level) {
    if (!o_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *o_.indent;
  }

  render_context& ctx_;
  const json_options& o_;
  std::string out_;
};

}  // namespace

std::string to_json(render_context& ctx, const value& v, const json_options& opts) {
  encoder e(ctx, opts);
  e.encode(v, 0);
  std::string out = e.take();
  ctx.check_string(out.size());
  ctx.charge(out.size());
  return out;
}

}  // namespace spate::jinja
