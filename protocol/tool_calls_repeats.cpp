// repeated_call_filter (tool_calls_detail.h): a repeated tool call is dropped.
#include <algorithm>

#include "protocol/tool_calls_detail.h"

namespace spate::api::detail {

void repeated_call_filter::add_args(std::string_view text) {
  for (const char c : text) {
    if (in_string_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') in_string_ = false;
    } else if (is_json_ws(c)) {
      continue;
    } else if (c == '"') {
      in_string_ = true;
    }
    args_ += c;
  }
}

bool repeated_call_filter::may_repeat() const {
  return std::any_of(done_.begin(), done_.end(), [&](const call& d) { return d.name == name_ && d.args.starts_with(args_); });
}

bool repeated_call_filter::repeats() const {
  return std::any_of(done_.begin(), done_.end(), [&](const call& d) { return d.name == name_ && d.args == args_; });
}

void repeated_call_filter::release(output_events& out) {
  out_index_ = next_out_++;
  for (output_event& h : held_) {
    h.index = out_index_;
    out.push_back(std::move(h));
  }
  held_.clear();
  holding_ = false;
}

output_events repeated_call_filter::filter(output_events in) {
  using kind = output_event::kind;
  output_events out;
  for (output_event& e : in) {
    switch (e.type) {
      case kind::call_begin:
        name_ = e.name;
        args_.clear();
        in_string_ = escape_ = false;
        holding_ = may_repeat();
        if (holding_) {
          held_.push_back(std::move(e));
        } else {
          out_index_ = next_out_++;
          e.index = out_index_;
          out.push_back(std::move(e));
        }
        break;
      case kind::arguments:
        add_args(e.text);
        if (holding_) {
          held_.push_back(std::move(e));
          if (!may_repeat()) release(out);
        } else {
          e.index = out_index_;
          out.push_back(std::move(e));
        }
        break;
      case kind::call_end:
        if (holding_) {
          if (e.complete && repeats()) {  // dropped, with its events
            held_.clear();
            holding_ = false;
            break;
          }
          release(out);
        }
        if (e.complete) done_.push_back({name_, args_});
        e.index = out_index_;
        out.push_back(std::move(e));
        break;
      default: out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace spate::api::detail
