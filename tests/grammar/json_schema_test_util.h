// Helpers shared by the JSON Schema compiler's tests: compile a schema, run a
// text through the matcher, and collect the compile error.
#pragma once

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <initializer_list>
#include <memory>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace spate::grammar::testing_util {

inline std::shared_ptr<const grammar> compile(const std::string& schema) {
  return std::make_shared<const grammar>(compile_json_schema(boost::json::parse(schema)));
}

// The whole text is a sentence of the grammar.
inline bool accepts(const std::shared_ptr<const grammar>& g, const std::string& s) {
  matcher m(g);
  return m.advance(s) && m.can_end();
}

// The compile error's message, or "<no error>". Schemas may nest deeply.
inline std::string error_of(const std::string& schema) {
  try {
    boost::json::parse_options opts;
    opts.max_depth = 1000;
    compile_json_schema(boost::json::parse(schema, {}, opts));
  } catch (const grammar_error& e) {
    return e.what();
  }
  return "<no error>";
}

inline void expect_accepts(const std::string& schema, std::initializer_list<std::string> good, std::initializer_list<std::string> bad) {
  const auto g = compile(schema);
  for (const auto& s : good) EXPECT_TRUE(accepts(g, s)) << schema << " should accept " << s;
  for (const auto& s : bad) EXPECT_FALSE(accepts(g, s)) << schema << " should reject " << s;
}

}  // namespace spate::grammar::testing_util
