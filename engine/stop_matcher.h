// Streaming stop-string detection over generated text.
//
// Contract: feed() receives the request's output text in order, as UTF-8-safe deltas (never a
// partial code point). It returns the part that can be sent to the client now; text that could
// still turn out to be the start of a stop string is held back. When a stop string completes,
// the result reports it and the emitted text ends right before it: neither the stop string nor
// anything after it is ever emitted, even when it was split across deltas. After a stop, feed()
// returns nothing. flush() ends the stream and returns whatever is still held back (empty after
// a stop).
//
// Which stop wins is a function of the whole text, independent of how it was split into deltas:
// the occurrence that ends first (as if text arrived byte by byte); if several end at the same
// byte, the longest (it starts first). Emitted text is cut at a stop string's first byte, which
// in valid UTF-8 is a code-point boundary, so emitted text stays UTF-8-safe.
//
// Empty stop strings are ignored (validate() rejects them). Not thread-safe; one per request.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spate {

class stop_matcher {
 public:
  struct result {
    std::string text;                   // safe to emit now
    bool stopped = false;               // a stop string completed in this feed
    std::optional<size_t> stop_index;   // index into the constructor's list when stopped
  };

  explicit stop_matcher(std::vector<std::string> stops);

  result feed(std::string_view delta);
  // Returns the held-back text and empties it; "" when stopped.
  std::string flush();

  bool stopped() const { return stopped_; }
  // The stop string that ended the stream, if any.
  std::optional<size_t> stop_index() const { return stop_index_; }
  const std::string* stop_string() const { return stop_index_ ? &stops_[*stop_index_] : nullptr; }
  // Bytes currently held back.
  size_t n_held() const { return held_.size(); }

 private:
  // Length of the longest suffix of held_ that is a proper prefix of some stop string.
  size_t partial_suffix_len() const;

  std::vector<std::string> stops_;
  size_t max_stop_len_ = 0;
  std::string held_;
  bool stopped_ = false;
  std::optional<size_t> stop_index_;
};

}  // namespace spate
