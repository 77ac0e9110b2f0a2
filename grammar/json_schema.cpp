// JSON Schema -> grammar: keyword checks, dispatch by type, objects, arrays,
// enum/const, anyOf/oneOf/allOf and $ref (json_schema.h). Strings are in
// json_schema_strings.cpp, numbers in json_schema_numbers.cpp.
#include "grammar/json_schema.h"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "grammar/json_schema_internal.h"

namespace spate::grammar {
namespace json_detail {

namespace {

enum class family : uint8_t { annotation, core, object, array, string, numeric };

// Every keyword the compiler knows; anything else is refused.
const std::unordered_map<std::string_view, family>& keywords() {
  static const std::unordered_map<std::string_view, family> k{
      {"title", family::annotation}, {"description", family::annotation}, {"$schema", family::annotation},
      {"$id", family::annotation}, {"$anchor", family::annotation}, {"$comment", family::annotation},
      {"$vocabulary", family::annotation}, {"examples", family::annotation}, {"default", family::annotation},
      {"deprecated", family::annotation}, {"readOnly", family::annotation}, {"writeOnly", family::annotation},
      {"contentMediaType", family::annotation}, {"contentEncoding", family::annotation}, {"contentSchema", family::annotation},
      {"example", family::annotation}, {"discriminator", family::annotation},  // OpenAPI; oneOf still decides
      {"$defs", family::annotation}, {"definitions", family::annotation},  // resolved through $ref only
      {"type", family::core}, {"enum", family::core}, {"const", family::core}, {"anyOf", family::core},
      {"oneOf", family::core}, {"allOf", family::core}, {"$ref", family::core},
      {"properties", family::object}, {"required", family::object}, {"additionalProperties", family::object},
      {"unevaluatedProperties", family::object},
      {"items", family::array}, {"prefixItems", family::array}, {"additionalItems", family::array},
      {"minItems", family::array}, {"maxItems", family::array}, {"uniqueItems", family::array},
      {"minLength", family::string}, {"maxLength", family::string}, {"pattern", family::string}, {"format", family::string},
      {"minimum", family::numeric}, {"maximum", family::numeric}, {"exclusiveMinimum", family::numeric},
      {"exclusiveMaximum", family::numeric}, {"multipleOf", family::numeric}};
  return k;
}

family family_of(std::string_view key, const std::string& ptr) {
  const auto it = keywords().find(key);
  if (it == keywords().end()) schema_fail(ptr, "unsupported JSON Schema keyword '" + std::string(key) + "'");
  return it->second;
}

// Refuses keywords of s other than annotations and `allowed`, which cannot be combined with `with`.
void only_with(const boost::json::object& s, const std::string& ptr, std::string_view with, std::initializer_list<std::string_view> allowed) {
  for (const auto& kv : s) {
    if (kv.key() == with || family_of(kv.key(), ptr) == family::annotation) continue;
    bool ok = false;
    for (const auto a : allowed) ok = ok || kv.key() == a;
    if (!ok) schema_fail(ptr, "'" + std::string(kv.key()) + "' alongside '" + std::string(with) + "' is not supported");
  }
}

// One object property in the grammar: its name, schema and schema pointer.
struct property {
  std::string name;
  const boost::json::value* schema = nullptr;  // nullptr: any value
  std::string ptr;
};

// The object keywords of one schema, or of several merged (allOf).
struct object_view {
  std::vector<property> props;
  std::unordered_map<std::string, size_t> index;              // property name -> position in props
  std::vector<std::pair<std::string, std::string>> required;  // name, pointer of the "required" keyword
  const boost::json::value* additional = nullptr;              // a schema for extra members
  std::string additional_ptr;
  bool additional_false = false;
  bool shaped = false;  // properties, required or additionalProperties false/schema given
};


// Compiles one schema document. Rules for $ref targets are shared by target
// pointer, which makes recursion work (the rule is declared before its body).
class compiler {
 public:
  compiler(grammar_builder& b, const boost::json::value& root) : b_(b), r_(b), root_(root) {}

  alternative compile(const boost::json::value& s, const std::string& ptr, int depth) {
    if (depth > k_max_nesting) schema_fail(ptr, "schemas nested deeper than " + std::to_string(k_max_nesting) + " (counting $ref)");
    if (++nodes_ > k_max_schema_nodes) schema_fail(ptr, "the schema has more than " + std::to_string(k_max_schema_nodes) + " subschemas");
    if (s.is_bool()) {
      if (s.get_bool()) return {ref(r_.value)};
      schema_fail(ptr, "the schema is false: no value matches it (unsatisfiable)");
    }
    if (!s.is_object()) schema_fail(ptr, "a schema must be an object or a boolean");
    const boost::json::object& o = s.get_object();
    for (const auto& kv : o) family_of(kv.key(), ptr);  // refuses unknown keywords
    if (const auto* r = o.if_contains("$ref")) {
      only_with(o, ptr, "$ref", {});
      return compile_ref(*r, ptr, depth);
    }
    if (o.contains("allOf")) return compile_all_of(s, ptr, depth);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (o.contains(key)) {
        only_with(o, ptr, key, {});
        return compile_any_of(o.at(key), pointer_child(ptr, key), depth);
      }
    }
    if (o.contains("const") || o.contains("enum")) return compile_literals(o, ptr);
    return compile_types(o, ptr, depth);
  }

 private:
  // The "type" keyword's names, or the types implied by the keywords present
  // when it is absent (empty: any value).
  static std::vector<std::string_view> types_of(const boost::json::object& o, const std::string& ptr, bool infer) {
    static constexpr std::string_view k_names[] = {"null", "boolean", "object", "array", "number", "string", "integer"};
    std::vector<std::string_view> out;
    const auto* t = o.if_contains("type");
    if (t == nullptr) {
      if (!infer) return out;
      bool fam[6] = {};
      for (const auto& kv : o) fam[static_cast<int>(family_of(kv.key(), ptr))] = true;
      if (fam[static_cast<int>(family::object)]) out.push_back("object");
      if (fam[static_cast<int>(family::array)]) out.push_back("array");
      if (fam[static_cast<int>(family::string)]) out.push_back("string");
      if (fam[static_cast<int>(family::numeric)]) out.push_back("number");
      return out;
    }
    const std::string tp = pointer_child(ptr, "type");
    const auto add = [&](const boost::json::value& v) {
      for (const auto n : k_names) {
        if (v.is_string() && v.get_string() == n) return out.push_back(n);
      }
      schema_fail(tp, "unknown type " + boost::json::serialize(v));
    };
    if (t->is_array()) {
      for (const auto& v : t->get_array()) add(v);
      if (out.empty()) schema_fail(tp, "an empty type list matches nothing (unsatisfiable)");
    } else {
      add(*t);
    }
    return out;
  }

  alternative compile_types(const boost::json::object& o, const std::string& ptr, int depth) {
    const auto types = types_of(o, ptr, true);
    if (types.empty()) return {ref(r_.value)};
    std::vector<alternative> alts;
    for (const auto t : types) {
      if (t == "null") {
        alts.push_back(grammar_builder::literal("null"));
      } else if (t == "boolean") {
        alts.push_back(grammar_builder::literal("true"));
        alts.push_back(grammar_builder::literal("false"));
      } else if (t == "string") {
        alts.push_back(string_schema(b_, r_, o, ptr));
      } else if (t == "integer") {
        alts.push_back(integer_schema(b_, r_, o, ptr));
      } else if (t == "number") {
        alts.push_back(number_schema(b_, r_, o, ptr));
      } else if (t == "object") {
        object_view v;
        collect_object(o, ptr, v);
        alts.push_back(object_shape(v, ptr, depth));
      } else {
        alts.push_back(array_shape(o, ptr, depth));
      }
    }
    return alts.size() == 1 ? alts[0] : b_.group(std::move(alts));
  }

  // enum / const: the values' compact serializations (those of the listed types, if any).
  alternative compile_literals(const boost::json::object& o, const std::string& ptr) {
    const bool is_const = o.contains("const");
    const std::string kp = pointer_child(ptr, is_const ? "const" : "enum");
    only_with(o, ptr, is_const ? "const" : "enum", {"type"});
    std::vector<const boost::json::value*> values;
    if (is_const) {
      values.push_back(&o.at("const"));
    } else {
      if (!o.at("enum").is_array()) schema_fail(kp, "must be an array");
      for (const auto& v : o.at("enum").get_array()) values.push_back(&v);
      if (values.empty()) schema_fail(kp, "an empty enum matches nothing (unsatisfiable)");
    }
    const auto types = types_of(o, ptr, false);
    std::vector<std::string> texts;
    for (const auto* v : values) {
      bool ok = types.empty();
      for (const auto t : types) ok = ok || has_type(*v, t);
      if (ok) texts.push_back(json_literal(*v, kp));
    }
    if (texts.empty()) schema_fail(kp, "no value here is of the schema's type (unsatisfiable)");
    return literal_choice(b_, std::move(texts));
  }

  alternative compile_any_of(const boost::json::value& list, const std::string& kp, int depth) {
    if (!list.is_array() || list.get_array().empty()) schema_fail(kp, "must be a non-empty array of schemas");
    if (list.get_array().size() > k_max_any_of_branches) schema_fail(kp, "more than " + std::to_string(k_max_any_of_branches) + " branches");
    std::vector<alternative> alts;
    for (size_t i = 0; i < list.get_array().size(); ++i) {
      alts.push_back(compile(list.get_array()[i], pointer_child(kp, std::to_string(i)), depth + 1));
    }
    return alts.size() == 1 ? alts[0] : b_.group(std::move(alts));
  }

  alternative compile_all_of(const boost::json::value& s, const std::string& ptr, int depth) {
    const boost::json::object& o = s.get_object();
    const auto& list = o.at("allOf");
    const std::string kp = pointer_child(ptr, "allOf");
    if (!list.is_array() || list.get_array().empty()) schema_fail(kp, "must be a non-empty array of schemas");
    bool alone = list.get_array().size() == 1;
    for (const auto& kv : o) alone = alone && (kv.key() == "allOf" || family_of(kv.key(), ptr) == family::annotation);
    if (alone) return compile(list.get_array()[0], pointer_child(kp, "0"), depth + 1);
    object_view v;
    merge_object(s, ptr, v, depth);
    return object_shape(v, ptr, depth);
  }

  // Adds the object keywords of schema s (and of its allOf branches and $ref
  // targets) to v; anything but an object schema is refused.
  void merge_object(const boost::json::value& s, const std::string& ptr, object_view& v, int depth) {
    if (depth > k_max_nesting) schema_fail(ptr, "schemas nested deeper than " + std::to_string(k_max_nesting) + " (counting $ref)");
    if (++nodes_ > k_max_schema_nodes) schema_fail(ptr, "the schema has more than " + std::to_string(k_max_schema_nodes) + " subschemas");
    if (s.is_bool()) {
      if (s.get_bool()) return;
      schema_fail(ptr, "the schema is false: no value matches it (unsatisfiable)");
    }
    if (!s.is_object()) schema_fail(ptr, "a schema must be an object or a boolean");
    const boost::json::object& o = s.get_object();
    for (const auto& kv : o) {
      const family f = family_of(kv.key(), ptr);
      const bool object_type = kv.key() == "type" && kv.value() == "object";
      if (f != family::annotation && f != family::object && !object_type && kv.key() != "allOf" && kv.key() != "$ref") {
        schema_fail(ptr, "allOf is supported only for object schemas ('" + std::string(kv.key()) + "' is not an object keyword)");
      }
    }
    if (const auto* r = o.if_contains("$ref")) {
      std::string target_ptr;
      const boost::json::value& target = lookup(*r, ptr, target_ptr);
      merge_object(target, target_ptr, v, depth + 1);
    }
    if (const auto* list = o.if_contains("allOf")) {
      const std::string kp = pointer_child(ptr, "allOf");
      if (!list->is_array() || list->get_array().empty()) schema_fail(kp, "must be a non-empty array of schemas");
      for (size_t i = 0; i < list->get_array().size(); ++i) {
        merge_object(list->get_array()[i], pointer_child(kp, std::to_string(i)), v, depth + 1);
      }
    }
    collect_object(o, ptr, v);
  }

  // properties / required / additionalProperties / unevaluatedProperties of o, into v.
  static void collect_object(const boost::json::object& o, const std::string& ptr, object_view& v) {
    if (const auto* props = o.if_contains("properties")) {
      const std::string kp = pointer_child(ptr, "properties");
      if (!props->is_object()) schema_fail(kp, "must be an object of schemas");
      for (const auto& kv : props->get_object()) {
        const std::string name(kv.key());
        const auto [it, added] = v.index.emplace(name, v.props.size());
        if (added) {
          v.props.push_back({name, &kv.value(), pointer_child(kp, name)});
        } else if (*v.props[it->second].schema != kv.value()) {
          schema_fail(pointer_child(kp, name), "property '" + name + "' is defined differently by two allOf branches");
        }
      }
      v.shaped = true;
    }
    if (const auto* req = o.if_contains("required")) {
      const std::string kp = pointer_child(ptr, "required");
      if (!req->is_array()) schema_fail(kp, "must be an array of strings");
      for (const auto& n : req->get_array()) {
        if (!n.is_string()) schema_fail(kp, "must be an array of strings");
        v.required.emplace_back(std::string(n.get_string()), kp);
      }
      v.shaped = true;
    }
    if (const auto* ap = o.if_contains("additionalProperties")) {
      const std::string kp = pointer_child(ptr, "additionalProperties");
      if (ap->is_bool()) {
        v.additional_false = v.additional_false || !ap->get_bool();
      } else if (ap->is_object()) {
        if (v.additional != nullptr && *v.additional != *ap) schema_fail(kp, "two different additionalProperties schemas (allOf) are not supported");
        v.additional = ap, v.additional_ptr = kp;
      } else {
        schema_fail(kp, "must be a schema");
      }
      v.shaped = v.shaped || v.additional_false || v.additional != nullptr;
    }
    if (const auto* up = o.if_contains("unevaluatedProperties"); up != nullptr && !up->is_bool()) {
      schema_fail(pointer_child(ptr, "unevaluatedProperties"), "only true or false is supported");
    }
  }

  // '{' ws members '}' with the members in order: required ones always,
  // optional ones maybe, extras (additionalProperties schema) after them.
  //   first_i: members from i on, none written yet; rest_i: from i on, each after a ','.
  alternative object_shape(const object_view& v, const std::string& ptr, int depth) {
    if (!v.shaped) return {ref(r_.object)};
    std::vector<property> props = v.props;
    std::unordered_map<std::string, size_t> index = v.index;
    std::vector<bool> required(props.size(), false);
    for (const auto& [name, kp] : v.required) {
      const size_t i = index.emplace(name, props.size()).first->second;
      if (i == props.size()) {
        if (v.additional_false) schema_fail(kp, "required property '" + name + "' is not in properties and additionalProperties is false");
        props.push_back({name, v.additional, v.additional_ptr});
        required.push_back(false);
      }
      required[i] = true;
    }
    if (std::count(required.begin(), required.end(), false) > static_cast<std::ptrdiff_t>(k_max_optional_properties)) {
      schema_fail(ptr, "more than " + std::to_string(k_max_optional_properties) + " optional properties in one object");
    }
    const symbol ws = ref(r_.ws);
    std::vector<int32_t> member(props.size(), -1);  // -1: never present (schema false)
    for (size_t i = 0; i < props.size(); ++i) {
      const bool never = props[i].schema != nullptr && props[i].schema->is_bool() && !props[i].schema->get_bool();
      if (never && required[i]) schema_fail(props[i].ptr, "required property '" + props[i].name + "' has the schema false (unsatisfiable)");
      if (never) continue;
      const alternative value = props[i].schema != nullptr ? compile(*props[i].schema, props[i].ptr, depth + 1) : alternative{ref(r_.value)};
      member[i] = b_.add_helper({grammar_builder::literal(json_literal(boost::json::value(props[i].name), ptr)) + ws + bytes_symbol(':', ':') + ws + value + ws});
    }
    alternative rest, first;  // rest_n, first_n: the extras
    if (v.additional != nullptr && !v.additional_false) {
      const alternative value = compile(*v.additional, v.additional_ptr, depth + 1);
      std::vector<std::string> known;  // extra keys must differ from every listed name
      for (const auto& p : props) {
        const std::string quoted = json_literal(boost::json::value(p.name), ptr);
        known.push_back(quoted.substr(1, quoted.size() - 2));
      }
      const alternative quote = {bytes_symbol('"', '"')};
      const alternative key = known.empty() ? alternative{ref(r_.string)} : quote + string_except(b_, r_, known) + quote;
      const int32_t extra = b_.add_helper({key + ws + bytes_symbol(':', ':') + ws + value + ws});
      rest = b_.repeat({bytes_symbol(',', ','), ws, ref(extra)}, 0, -1);
      first = b_.group({alternative{ref(extra)} + rest, {}});
    }
    for (size_t i = props.size(); i-- > 0;) {
      if (member[i] < 0) continue;
      const alternative with = alternative{bytes_symbol(',', ','), ws, ref(member[i])} + rest;
      const alternative first_with = alternative{ref(member[i])} + rest;
      if (required[i]) {
        first = first_with;
        rest = {ref(b_.add_helper({with}))};
      } else {
        first = {ref(b_.add_helper({first_with, first}))};
        rest = {ref(b_.add_helper({with, rest}))};
      }
    }
    alternative shape = alternative{bytes_symbol('{', '{'), ws} + first + bytes_symbol('}', '}');
    if (v.additional == nullptr || v.additional_false) return shape;
    // Extra keys differ from the listed ones by the grammar, from each other at run time.
    const int32_t rule = b_.add_helper({std::move(shape)});
    b_.set_distinct(rule);
    return {ref(rule)};
  }

  // A helper rule: the value of schema s (nullptr: any), then whitespace.
  int32_t element(const boost::json::value* s, const std::string& ptr, int depth) {
    const alternative value = s != nullptr ? compile(*s, ptr, depth + 1) : alternative{ref(r_.value)};
    return b_.add_helper({value + ref(r_.ws)});
  }

  // '[' ws elements ']': prefixItems (or draft-4 array items) first, then
  // items (or additionalItems), between minItems and maxItems in all.
  //   tail_i: what follows after i elements (i >= 1), each further one after a ','.
  alternative array_shape(const boost::json::object& o, const std::string& ptr, int depth) {
    std::vector<std::pair<const boost::json::value*, std::string>> prefix;
    const auto add_prefix = [&](const boost::json::value& list, const std::string& kp) {
      if (!list.is_array()) schema_fail(kp, "must be an array of schemas");
      for (size_t i = 0; i < list.get_array().size(); ++i) prefix.emplace_back(&list.get_array()[i], pointer_child(kp, std::to_string(i)));
    };
    const boost::json::value* rest = o.if_contains("items");
    std::string rest_ptr = pointer_child(ptr, "items");
    if (const auto* p = o.if_contains("prefixItems")) add_prefix(*p, pointer_child(ptr, "prefixItems"));
    if (rest != nullptr && rest->is_array()) {
      if (!prefix.empty()) schema_fail(rest_ptr, "items as an array together with prefixItems is not supported");
      add_prefix(*rest, rest_ptr);
      rest = o.if_contains("additionalItems"), rest_ptr = pointer_child(ptr, "additionalItems");
    } else if (o.contains("additionalItems")) {
      schema_fail(pointer_child(ptr, "additionalItems"), "additionalItems needs items as an array (use prefixItems and items)");
    }
    const auto* u = o.if_contains("uniqueItems");
    if (u != nullptr && !u->is_bool()) schema_fail(pointer_child(ptr, "uniqueItems"), "must be a boolean");
    const bool unique = u != nullptr && u->get_bool();
    const int64_t lo = o.contains("minItems") ? count_keyword(o, "minItems", ptr, k_max_repeat) : 0;
    int64_t hi = o.contains("maxItems") ? count_keyword(o, "maxItems", ptr, k_max_repeat) : -1;
    if (hi >= 0 && lo > hi) schema_fail(pointer_child(ptr, "minItems"), "minItems is greater than maxItems");
    bool rest_none = rest != nullptr && rest->is_bool() && !rest->get_bool();
    size_t k = prefix.size();
    for (size_t i = 0; i < k; ++i) {
      if (prefix[i].first->is_bool() && !prefix[i].first->get_bool()) k = i, rest_none = true;  // no element i
    }
    if (hi >= 0 && static_cast<size_t>(hi) < k) k = static_cast<size_t>(hi);
    if (rest_none) hi = static_cast<int64_t>(k);
    if (lo > hi && hi >= 0) schema_fail(pointer_child(ptr, "minItems"), "minItems asks for more elements than the schema allows (unsatisfiable)");
    const symbol comma = bytes_symbol(',', ','), ws = ref(r_.ws);
    // After i >= k elements: items repeated up to the bounds.
    const auto tail_items = [&](int64_t i) -> alternative {
      if (hi >= 0 && hi <= i) return {};
      const int32_t item = b_.add_helper({{comma, ws, ref(element(rest, rest_ptr, depth))}});
      return b_.repeat({ref(item)}, std::max<int64_t>(0, lo - i), hi < 0 ? -1 : hi - i);
    };
    alternative first;
    if (k == 0) {
      if (hi == 0) return grammar_builder::literal("[") + ws + bytes_symbol(']', ']');
      first = alternative{ref(element(rest, rest_ptr, depth))} + tail_items(1);
    } else {
      alternative tail = tail_items(static_cast<int64_t>(k));
      for (size_t i = k - 1; i >= 1; --i) {
        std::vector<alternative> alts{alternative{comma, ws, ref(element(prefix[i].first, prefix[i].second, depth))} + tail};
        if (static_cast<int64_t>(i) >= lo) alts.emplace_back();
        tail = {ref(b_.add_helper(std::move(alts)))};
      }
      first = alternative{ref(element(prefix[0].first, prefix[0].second, depth))} + tail;
    }
    if (lo == 0) first = b_.group({first, {}});
    alternative shape = grammar_builder::literal("[") + ws + first + bytes_symbol(']', ']');
    if (!unique) return shape;
    // The items' distinctness is checked at run time (distinct_items.h).
    const int32_t rule = b_.add_helper({std::move(shape)});
    b_.set_distinct(rule);
    return {ref(rule)};
  }

  // The schema a "#..." reference points at; target_ptr receives its pointer.
  const boost::json::value& lookup(const boost::json::value& r, const std::string& ptr, std::string& target_ptr) const {
    const std::string kp = pointer_child(ptr, "$ref");
    if (!r.is_string()) schema_fail(kp, "must be a string");
    const std::string_view text = r.get_string();
    if (!text.starts_with("#")) schema_fail(kp, "only references within the schema ('#...') are supported, not '" + std::string(text) + "'");
    std::string frag;
    for (size_t i = 1; i < text.size(); ++i) {  // percent-decoding (URI fragment)
      if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) && std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
        frag += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
        i += 2;
      } else {
        frag += text[i];
      }
    }
    if (!frag.empty() && frag[0] != '/') schema_fail(kp, "anchor references ('" + std::string(text) + "') are not supported; use a JSON pointer");
    const boost::json::value* cur = &root_;
    target_ptr.clear();
    size_t pos = 1;
    while (pos <= frag.size() && !frag.empty()) {
      const size_t end = std::min(frag.find('/', pos), frag.size());
      std::string token;
      for (size_t i = pos; i < end; ++i) {
        if (frag[i] == '~' && i + 1 < end && (frag[i + 1] == '0' || frag[i + 1] == '1')) {
          token += frag[++i] == '0' ? '~' : '/';
        } else {
          token += frag[i];
        }
      }
      const boost::json::value* next = nullptr;
      if (cur->is_object()) next = cur->get_object().if_contains(token);
      if (cur->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos && token.size() < 10) {
        const size_t idx = std::stoul(token);
        if (idx < cur->get_array().size()) next = &cur->get_array()[idx];
      }
      if (next == nullptr) schema_fail(kp, "cannot resolve '" + std::string(text) + "'");
      cur = next;
      target_ptr = pointer_child(target_ptr, token);
      pos = end + 1;
    }
    return *cur;
  }

  // A $ref target enclosing itself (recursion) gets a fresh copy per level,
  // down to k_max_ref_recursion levels; below that the reference is a rule
  // with no alternatives, which the productive-rule pruning removes with the
  // branches that need it (an optional member, a non-empty array, an anyOf
  // branch). So every recursive structure has a bottom and a generation
  // always finishes. Non-recursive repeats share one rule per level.
  alternative compile_ref(const boost::json::value& r, const std::string& ptr, int depth) {
    std::string target_ptr;
    const boost::json::value& target = lookup(r, ptr, target_ptr);
    int& level = active_[target_ptr];
    if (level >= k_max_ref_recursion) {
      if (bottom_ < 0) bottom_ = b_.add_rule(".bottom", {});
      return {ref(bottom_)};
    }
    const auto key = std::make_pair(target_ptr, level);
    if (const auto it = refs_.find(key); it != refs_.end()) return {ref(it->second)};
    const int32_t id = b_.declare_rule("$ref " + pointer_text(target_ptr) + (level > 0 ? " #" + std::to_string(level) : ""));
    refs_.emplace(key, id);
    ++level;
    b_.set_alts(id, {compile(target, target_ptr, depth + 1)});
    --level;  // std::map references stay valid while compile() inserts
    return {ref(id)};
  }

  grammar_builder& b_;
  json_rules r_;
  const boost::json::value& root_;
  size_t nodes_ = 0;
  std::map<std::pair<std::string, int>, int32_t> refs_;  // ($ref target pointer, recursion level) -> its rule
  std::map<std::string, int> active_;                    // target pointer -> copies enclosing the current point
  int32_t bottom_ = -1;                                  // the rule below the deepest level: no alternatives
};

}  // namespace
}  // namespace json_detail

alternative add_json_schema(grammar_builder& b, const boost::json::value& schema) {
  const size_t first_rule = b.n_rules();
  const alternative value = json_detail::compiler(b, schema).compile(schema, "", 0);
  // Branches that can never complete (an anyOf branch recursing without a
  // base case) are pruned from the new rules, so a generation cannot enter a
  // dead end and validate() accepts the grammar; when the value itself cannot
  // complete, the schema is unsatisfiable.
  const std::vector<bool> productive = productive_rules(b.peek());
  const auto ok = [&](const symbol& s) { return s.type == symbol::kind::bytes ? s.set.any() : productive[static_cast<size_t>(s.rule)]; };
  for (size_t r = first_rule; r < b.n_rules(); ++r) {
    const auto& alts = b.peek().rules[r].alts;
    if (productive[r] && std::all_of(alts.begin(), alts.end(), [&](const alternative& a) { return std::all_of(a.begin(), a.end(), ok); })) continue;
    std::vector<alternative> kept;
    for (const alternative& a : alts) {
      if (std::all_of(a.begin(), a.end(), ok)) kept.push_back(a);
    }
    b.set_alts(static_cast<int32_t>(r), std::move(kept));
  }
  if (!std::all_of(value.begin(), value.end(), ok)) {
    throw grammar_error("(root): the schema is unsatisfiable: no finite JSON value matches it (a recursion without a base case?)");
  }
  return value;
}

alternative add_json_object(grammar_builder& b) { return {ref(json_detail::json_rules(b).object)}; }

grammar compile_json_schema(const boost::json::value& schema, bool compact) {
  grammar_builder b([] { return std::string("(root): "); });
  b.set_json_compact(compact);
  const int32_t root = b.add_rule("root", {add_json_schema(b, schema)});
  try {
    return b.finish(root);
  } catch (const grammar_error& e) {
    throw grammar_error(std::string("(root): ") + e.what());
  }
}

grammar compile_json_object(bool compact) {
  grammar_builder b;
  b.set_json_compact(compact);
  const json_detail::json_rules r(b);
  return b.finish(b.add_rule("root", {{ref(r.object)}}));
}

}  // namespace spate::grammar
