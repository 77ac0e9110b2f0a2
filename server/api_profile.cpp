#include "server/api_profile.h"

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "server/api_router.h"
#include "util/trace.h"

namespace spate {

namespace json = boost::json;

boost::asio::awaitable<void> handle_profile(server_context& ctx, http_exchange& ex, http_io& io, bool start) {
  const unsigned v = ex.req.version();
  if (!ctx.opts.profiler_enabled) {
    co_await io.write_response(ex, make_error_response(http::status::not_found,
                                                       "the profiler is off; start spate with SPATE_PROFILER_ENABLED=true",
                                                       "profiler_disabled", v));
    co_return;
  }
  json::object body;
  if (start) {
    if (std::string err = trace::start(ctx.opts.profiler_dir); !err.empty()) {
      const bool busy = err.find("already") != std::string::npos;
      co_await io.write_response(ex, make_error_response(busy ? http::status::conflict : http::status::internal_server_error, err,
                                                         busy ? "profile_running" : "profiler_error", v));
      co_return;
    }
    spdlog::info("profiler: recording (traces go to {})", ctx.opts.profiler_dir);
    body["status"] = "recording";
    body["dir"] = ctx.opts.profiler_dir;
  } else {
    // Writing blocks this I/O thread for the file's size (a few MB per second
    // recorded); an operator's action, not a serving path.
    const trace::session_result r = trace::stop();
    if (!r.error.empty()) {
      const bool idle = r.path.empty();
      co_await io.write_response(ex, make_error_response(idle ? http::status::conflict : http::status::internal_server_error, r.error,
                                                         idle ? "no_profile_running" : "profiler_error", v));
      co_return;
    }
    spdlog::info("profiler: wrote {} ({} spans, {} dropped)", r.path, r.n_events, r.n_dropped);
    body["status"] = "stopped";
    body["path"] = r.path;
    body["n_events"] = r.n_events;
    body["n_dropped"] = r.n_dropped;
  }
  co_await io.write_response(ex, make_json_response(http::status::ok, json::serialize(body), v));
}

}  // namespace spate
