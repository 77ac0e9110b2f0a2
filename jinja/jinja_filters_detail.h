// The built-in filters are spread over three files by job: jinja_filters.cpp (the registry,
// find_filter, and the sequence / mapping filters), jinja_filters_text.cpp (string filters)
// and jinja_filters_number.cpp (number conversions). This header joins them; internal to
// jinja/. Every filter has the filter_fn signature and Jinja2's semantics, argument names and
// error messages.
#pragma once

#include <string>

#include "jinja/jinja_value.h"

namespace spate::jinja::filters_detail {

// A str value of s (Markup if markup), after checking and charging its size to ctx.
value make_str(render_context& ctx, std::string s, bool markup = false);

// markupsafe.soft_str: strings (and Markup) unchanged, anything else str().
value soft_str(render_context& ctx, const value& v);

// String filters (jinja_filters_text.cpp).
value f_capitalize(render_context& ctx, const value& v, call_args& a);
value f_center(render_context& ctx, const value& v, call_args& a);
value f_escape(render_context& ctx, const value& v, call_args& a);
value f_forceescape(render_context& ctx, const value& v, call_args& a);
value f_format(render_context& ctx, const value& v, call_args& a);
value f_indent(render_context& ctx, const value& v, call_args& a);
value f_lower(render_context& ctx, const value& v, call_args& a);
value f_upper(render_context& ctx, const value& v, call_args& a);
value f_replace(render_context& ctx, const value& v, call_args& a);
value f_safe(render_context& ctx, const value& v, call_args& a);
value f_string(render_context& ctx, const value& v, call_args& a);
value f_title(render_context& ctx, const value& v, call_args& a);
value f_tojson(render_context& ctx, const value& v, call_args& a);
value f_trim(render_context& ctx, const value& v, call_args& a);
value f_truncate(render_context& ctx, const value& v, call_args& a);
value f_wordcount(render_context& ctx, const value& v, call_args& a);

// Number filters (jinja_filters_number.cpp).
value f_abs(render_context& ctx, const value& v, call_args& a);
value f_float(render_context& ctx, const value& v, call_args& a);
value f_int(render_context& ctx, const value& v, call_args& a);
value f_round(render_context& ctx, const value& v, call_args& a);

}  // namespace spate::jinja::filters_detail
