// The route table (server/route_table.h) and the router's dispatch
// (server/api_router.h) without a socket, a model or an engine: lookups,
// path parameters, 405 with Allow, 404, public routes, OPTIONS and CORS
// preflights, the drain, and the server's own table.
#include "server/route_table.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "server/api_router.h"
#include "server_test_util.h"

namespace spate {
namespace {

using test_server::error_of;
using test_server::recording_io;
using test_server::run_sync;
using test_server::test_context;
using verb = http::verb;
using outcome = route_match::outcome;

route_handler noop() {
  return [](server_context&, http_exchange&, http_io&, const route_params&) -> boost::asio::awaitable<void> { co_return; };
}

TEST(RouteTable, RejectsMalformedPatterns) {
  route_table t;
  for (const char* bad : {"", "health", "/a/{", "/a/{}", "/a/{...}", "/a/{x...}/b", "/a/b}", "/a/x{y}"}) {
    EXPECT_THROW(t.add({{verb::get}, bad, route_auth::api_key, noop()}), std::invalid_argument) << bad;
  }
  EXPECT_THROW(t.add({{}, "/a", route_auth::api_key, noop()}), std::invalid_argument) << "no methods";
  t.add({{verb::get}, "/a", route_auth::api_key, noop()});
  EXPECT_THROW(t.add({{verb::get}, "/a", route_auth::api_key, noop()}), std::invalid_argument) << "GET /a twice";
  EXPECT_THROW(t.add({{verb::head}, "/a", route_auth::api_key, noop()}), std::invalid_argument) << "GET implies HEAD";
  t.add({{verb::post}, "/a", route_auth::api_key, noop()});  // another method on the same path is fine
  EXPECT_EQ(t.routes().size(), 2u);
}

TEST(RouteTable, LiteralsMatchExactly) {
  route_table t;
  t.add({{verb::get}, "/", route_auth::open, noop()});
  t.add({{verb::get}, "/v1/models", route_auth::api_key, noop()});
  EXPECT_EQ(t.match(verb::get, "/").result, outcome::found);
  EXPECT_EQ(t.match(verb::get, "/v1/models").found, &t.routes()[1]);
  for (const char* miss : {"", "*", "//", "/v1", "/v1/", "/v1/models/", "/v1/models/x", "/v1/Models", "/v1/modelsx", "v1/models",
                           "http://h/v1/models"}) {
    const route_match m = t.match(verb::get, miss);
    EXPECT_EQ(m.result, outcome::not_found) << miss;
    EXPECT_EQ(m.found, nullptr) << miss;
    EXPECT_FALSE(m.is_public) << miss;
  }
}

TEST(RouteTable, PathParameters) {
  route_table t;
  t.add({{verb::get}, "/users/{user}/items/{item}", route_auth::api_key, noop()});
  t.add({{verb::get}, "/files/{path...}", route_auth::api_key, noop()});
  route_match m = t.match(verb::get, "/users/ann/items/42");
  ASSERT_EQ(m.result, outcome::found);
  EXPECT_EQ(m.params.get("user"), "ann");
  EXPECT_EQ(m.params.get("item"), "42");
  EXPECT_EQ(m.params.get("nope"), "");
  EXPECT_EQ(t.match(verb::get, "/users//items/42").result, outcome::not_found) << "a parameter is never empty";
  EXPECT_EQ(t.match(verb::get, "/users/a/b/items/42").result, outcome::not_found) << "a parameter is one segment";
  EXPECT_EQ(t.match(verb::get, "/users/ann/items/42/").result, outcome::not_found);
  // A rest parameter takes slashes and may be empty.
  m = t.match(verb::get, "/files/a/b/c.txt");
  ASSERT_EQ(m.result, outcome::found);
  EXPECT_EQ(m.params.get("path"), "a/b/c.txt");
  m = t.match(verb::get, "/files/");
  ASSERT_EQ(m.result, outcome::found);
  EXPECT_EQ(m.params.get("path"), "");
  EXPECT_EQ(t.match(verb::get, "/files").result, outcome::not_found);
}

TEST(RouteTable, MethodMismatchListsTheAllowedMethods) {
  route_table t;
  t.add({{verb::get}, "/r", route_auth::api_key, noop()});
  t.add({{verb::post}, "/w", route_auth::api_key, noop()});
  t.add({{verb::delete_}, "/x/{id}", route_auth::api_key, noop()});
  t.add({{verb::post, verb::get}, "/x/{id}", route_auth::api_key, noop()});
  EXPECT_EQ(t.match(verb::head, "/r").result, outcome::found) << "GET answers HEAD";
  route_match m = t.match(verb::post, "/r");
  EXPECT_EQ(m.result, outcome::method_not_allowed);
  EXPECT_EQ(m.found, nullptr);
  EXPECT_EQ(m.allow, "GET, HEAD");
  m = t.match(verb::get, "/w");
  EXPECT_EQ(m.result, outcome::method_not_allowed);
  EXPECT_EQ(m.allow, "POST");
  EXPECT_EQ(t.match(verb::head, "/w").allow, "POST") << "HEAD only where GET is";
  // Two routes on one path: each method finds its own, the Allow is their union in a fixed order.
  EXPECT_EQ(t.match(verb::delete_, "/x/7").found, &t.routes()[2]);
  EXPECT_EQ(t.match(verb::get, "/x/7").found, &t.routes()[3]);
  m = t.match(verb::put, "/x/7");
  EXPECT_EQ(m.result, outcome::method_not_allowed);
  EXPECT_EQ(m.allow, "GET, HEAD, POST, DELETE");
  EXPECT_EQ(allow_header_value(std::vector<verb>{verb::patch, verb::put, verb::get}), "GET, HEAD, PUT, PATCH");
}

TEST(RouteTable, PublicIsPerPathAndMethodAndFirstRouteWins) {
  route_table t;
  t.add({{verb::get}, "/p/{x}", route_auth::open, noop()});
  t.add({{verb::post}, "/p/{x}", route_auth::api_key, noop()});
  t.add({{verb::get}, "/p/special", route_auth::api_key, noop()});
  EXPECT_TRUE(t.is_public(verb::get, "/p/a"));
  EXPECT_TRUE(t.is_public(verb::head, "/p/a")) << "GET answers HEAD";
  EXPECT_FALSE(t.is_public(verb::post, "/p/a")) << "POST on the path needs the key";
  EXPECT_TRUE(t.is_public(verb::put, "/p/a")) << "no route for PUT: the path's 405 is public";
  EXPECT_FALSE(t.is_public(verb::get, "/p"));
  EXPECT_FALSE(t.is_public(verb::get, "/q"));
  // The first route added wins; the path is public for a method when any matching route for it is.
  route_match m = t.match(verb::get, "/p/special");
  EXPECT_EQ(m.found, &t.routes()[0]);
  EXPECT_TRUE(m.is_public);
  m = t.match(verb::post, "/p/a");
  EXPECT_EQ(m.found, &t.routes()[1]);
  EXPECT_FALSE(m.is_public) << "is_public is the method's, as the head admission sees it";
}

TEST(ApiRoutes, TheServersTable) {
  const route_table t = api_routes(true);
  for (const char* p : {"/health", "/ready", "/metrics", "/index.html", "/ui/chat.js", "/ui/", "/v1/models", "/v1/models/m", "/info"}) {
    EXPECT_EQ(t.match(verb::get, p).result, outcome::found) << p;
    EXPECT_EQ(t.match(verb::head, p).result, outcome::found) << p;
    const route_match m = t.match(verb::post, p);
    EXPECT_EQ(m.result, outcome::method_not_allowed) << p;
    EXPECT_EQ(m.allow, "GET, HEAD") << p;
  }
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/start_profile",
                        "/stop_profile", "/tokenize", "/detokenize", "/generate", "/generate_stream"}) {
    EXPECT_EQ(t.match(verb::post, p).result, outcome::found) << p;
    const route_match m = t.match(verb::get, p);
    EXPECT_EQ(m.result, outcome::method_not_allowed) << p;
    EXPECT_EQ(m.allow, "POST") << p;
    EXPECT_FALSE(t.is_public(verb::post, p)) << p;
  }
  // The chat page at GET / (public) and TGI's POST / (with the key).
  EXPECT_EQ(t.match(verb::get, "/").result, outcome::found);
  EXPECT_EQ(t.match(verb::post, "/").result, outcome::found);
  EXPECT_TRUE(t.is_public(verb::get, "/"));
  EXPECT_FALSE(t.is_public(verb::post, "/"));
  EXPECT_FALSE(t.match(verb::post, "/").is_public);
  // Public: the probes, the scraper and the chat page; nothing else.
  for (const char* p : {"/health", "/ready", "/metrics", "/", "/index.html", "/ui/x"}) EXPECT_TRUE(t.is_public(verb::get, p)) << p;
  for (const char* p : {"/v1/models", "/v1/models/m", "/healthz", "/nope", "/ui", "/info"}) EXPECT_FALSE(t.is_public(verb::get, p)) << p;
  // A model id may hold slashes (org/model), and may be empty.
  route_match m = t.match(verb::get, "/v1/models/org/test-model");
  ASSERT_EQ(m.result, outcome::found);
  EXPECT_EQ(m.params.get("id"), "org/test-model");
  EXPECT_EQ(t.match(verb::get, "/v1/models/").params.get("id"), "");
  // Without the chat page its paths are unknown and not public.
  const route_table no_ui = api_routes(false);
  for (const char* p : {"/index.html", "/ui/chat.js"}) {
    EXPECT_EQ(no_ui.match(verb::get, p).result, outcome::not_found) << p;
    EXPECT_FALSE(no_ui.is_public(verb::get, p)) << p;
  }
  EXPECT_EQ(no_ui.match(verb::get, "/").result, outcome::method_not_allowed) << "only TGI's POST /";
  EXPECT_FALSE(no_ui.is_public(verb::get, "/"));
  EXPECT_EQ(no_ui.routes().size() + 3, t.routes().size());
}

// Dispatches one request through handle_http_request; returns the one response.
http::response<http::string_body> dispatch(server_context& ctx, verb method, std::string target,
                                           std::vector<std::pair<std::string, std::string>> fields = {}) {
  http_exchange ex;
  ex.req.method(method);
  ex.req.target(target);
  ex.req.version(11);
  ex.req.set(http::field::host, "spate.example");
  for (auto& [k, v] : fields) ex.req.set(k, v);
  recording_io io;
  run_sync(handle_http_request(ctx, ex, io));
  EXPECT_EQ(io.responses.size(), 1u) << "exactly one response";
  EXPECT_EQ(ex.status, io.responses.empty() ? 0u : io.responses.front().result_int());
  return io.responses.empty() ? http::response<http::string_body>{} : io.responses.front();
}

TEST(Router, ProbesModelsAndErrors) {
  test_context t;
  auto res = dispatch(t.ctx, verb::get, "/health?verbose=1");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.body(), R"({"status":"ok"})");
  EXPECT_EQ(res[http::field::content_type], "application/json");

  res = dispatch(t.ctx, verb::get, "/ready");
  EXPECT_EQ(res.result(), http::status::service_unavailable);
  EXPECT_EQ(error_of(res.body()).at("message"), "warming up");
  EXPECT_EQ(error_of(res.body()).at("code"), "not_ready");
  EXPECT_EQ(res[http::field::retry_after], "1");
  t.ctx.ready = true;
  EXPECT_EQ(dispatch(t.ctx, verb::get, "/ready").body(), R"({"status":"ready"})");

  res = dispatch(t.ctx, verb::get, "/v1/models");
  ASSERT_EQ(res.result(), http::status::ok);
  const auto list = boost::json::parse(res.body()).as_object();
  EXPECT_EQ(list.at("object"), "list");
  EXPECT_EQ(list.at("data").as_array().at(0).at("id"), test_server::k_model_name);
  EXPECT_EQ(list.at("data").as_array().at(0).at("created"), 1700000000);

  res = dispatch(t.ctx, verb::get, std::string("/v1/models/") + test_server::k_model_name);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(boost::json::parse(res.body()).at("id"), test_server::k_model_name);
  res = dispatch(t.ctx, verb::get, "/v1/models/other");
  EXPECT_EQ(res.result(), http::status::not_found);
  EXPECT_EQ(res.body(),
            R"({"error":{"message":"The model 'other' does not exist","type":"not_found_error","param":"model","code":"model_not_found"}})");

  res = dispatch(t.ctx, verb::post, "/health");
  EXPECT_EQ(res.result(), http::status::method_not_allowed);
  EXPECT_EQ(res[http::field::allow], "GET, HEAD");
  EXPECT_EQ(res.body(),
            R"({"error":{"message":"method POST is not allowed on /health","type":"invalid_request_error","param":null,"code":null}})");
  res = dispatch(t.ctx, verb::delete_, "/v1/chat/completions?x");
  EXPECT_EQ(res.result(), http::status::method_not_allowed);
  EXPECT_EQ(res[http::field::allow], "POST");

  res = dispatch(t.ctx, verb::get, "/nope?a=b");
  EXPECT_EQ(res.result(), http::status::not_found);
  EXPECT_EQ(res.body(), R"({"error":{"message":"no route for GET /nope","type":"not_found_error","param":null,"code":"not_found"}})");
}

TEST(RouteTable, PercentDecodeIsStrict) {
  EXPECT_EQ(percent_decode("org%2Fmy%20model"), "org/my model");
  EXPECT_EQ(percent_decode("caf%C3%A9+x"), "caf\xC3\xA9+x") << "'+' is not a space in a path";
  EXPECT_EQ(percent_decode("caf\xC3\xA9"), "caf\xC3\xA9") << "raw UTF-8 passes";
  EXPECT_EQ(percent_decode(""), "");
  EXPECT_EQ(percent_decode("%41%6a"), "Aj");
  for (const char* bad : {"%", "%4", "a%zz", "%G0", "%C3", "%FF", "%C0%AF", "%ED%A0%80", "\xFF", "x%2"}) {
    EXPECT_FALSE(percent_decode(bad)) << bad;
  }
}

TEST(ApiRoutes, XApiKeyOnlyWhereAnthropicsClientsSendIt) {
  const route_table t = api_routes(true);
  for (const char* p : {"/v1/messages", "/v1/messages/count_tokens", "/v1/models", "/v1/models/org/m"}) EXPECT_TRUE(t.takes_x_api_key(p)) << p;
  for (const char* p : {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/api/chat", "/models",
                        "/tokenize", "/models/load", "/v1/load_lora_adapter", "/health", "/v1/messages/nope", "/nope"}) {
    EXPECT_FALSE(t.takes_x_api_key(p)) << p;
  }
}

TEST(Router, ModelIdsArePercentDecoded) {
  test_context t;
  auto res = dispatch(t.ctx, verb::get, "/v1/models/org%2Ftest%2Dmodel");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(boost::json::parse(res.body()).at("id"), test_server::k_model_name);
  for (const char* bad : {"/v1/models/org%2", "/v1/models/%zz", "/v1/models/%C3", "/v1/models/%FF", "/v1/models/x\xFF"}) {
    res = dispatch(t.ctx, verb::get, bad);
    EXPECT_EQ(res.result(), http::status::bad_request) << bad;
    EXPECT_EQ(error_of(res.body()).at("param"), "model") << bad;
  }
  res = dispatch(t.ctx, verb::get, "/v1/models/no%20such%20model");
  EXPECT_EQ(res.result(), http::status::not_found);
  EXPECT_EQ(error_of(res.body()).at("message"), "The model 'no such model' does not exist");
}

TEST(Router, ErrorsBeforeAHandlerTakeTheApisShape) {
  test_context t;
  // Anthropic's routes: {"type":"error","error":{"type","message"}}.
  auto res = dispatch(t.ctx, verb::get, "/v1/messages");
  EXPECT_EQ(res.result(), http::status::method_not_allowed);
  EXPECT_EQ(res[http::field::allow], "POST");
  EXPECT_EQ(res.body(), R"({"type":"error","error":{"type":"invalid_request_error","message":"method GET is not allowed on /v1/messages"}})");
  res = dispatch(t.ctx, verb::post, "/v1/messages/batches");
  EXPECT_EQ(res.result(), http::status::not_found);
  EXPECT_EQ(res.body(), R"({"type":"error","error":{"type":"not_found_error","message":"no route for POST /v1/messages/batches"}})");
  // Ollama's: {"error": "..."}.
  res = dispatch(t.ctx, verb::post, "/api/nope");
  EXPECT_EQ(res.result(), http::status::not_found);
  EXPECT_EQ(res.body(), R"({"error":"no route for POST /api/nope"})");
  res = dispatch(t.ctx, verb::get, "/api/chat");
  EXPECT_EQ(res.result(), http::status::method_not_allowed);
  EXPECT_EQ(res.body(), R"({"error":"method GET is not allowed on /api/chat"})");
  t.ctx.draining = true;
  res = dispatch(t.ctx, verb::post, "/v1/messages");
  EXPECT_EQ(res.result(), http::status::service_unavailable);
  EXPECT_EQ(res.body(), R"({"type":"error","error":{"type":"overloaded_error","message":"the server is shutting down"}})");
  EXPECT_EQ(res[http::field::retry_after], "1");
  res = dispatch(t.ctx, verb::post, "/api/chat");
  EXPECT_EQ(res.body(), R"({"error":"the server is shutting down"})");
}

TEST(Router, Every401AsksForBearer) {
  const api::api_error e{401, "missing or invalid API key", "", "", "invalid_api_key"};
  for (api::endpoint api : {api::endpoint::chat_completions, api::endpoint::messages, api::endpoint::ollama_chat,
                            api::endpoint::ollama_generate, api::endpoint::responses}) {
    const auto res = make_api_error_response(api, e, 11);
    EXPECT_EQ(res.result(), http::status::unauthorized);
    EXPECT_EQ(res[http::field::www_authenticate], "Bearer") << static_cast<int>(api);
  }
  EXPECT_EQ(make_api_error_response(api::endpoint::messages, e, 11).body(),
            R"({"type":"error","error":{"type":"authentication_error","message":"missing or invalid API key"}})");
  EXPECT_EQ(make_api_error_response(api::endpoint::ollama_chat, e, 11).body(), R"({"error":"missing or invalid API key"})");
}

TEST(Router, OptionsAndPreflightOnAnyPath) {
  test_context t;
  for (const char* p : {"/v1/completions", "/nope", "*"}) {
    auto res = dispatch(t.ctx, verb::options, p);
    EXPECT_EQ(res.result(), http::status::no_content) << p;
    EXPECT_EQ(res[http::field::allow], "GET, HEAD, POST, OPTIONS") << p;
  }
  auto res = dispatch(t.ctx, verb::options, "/nope",
                      {{"Origin", "https://app.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(res.result(), http::status::no_content);
  EXPECT_FALSE(res[http::field::access_control_allow_origin].empty()) << "the CORS policy answered";
  EXPECT_TRUE(res[http::field::allow].empty()) << "a preflight is not a plain OPTIONS";
}

TEST(Router, DrainRefusesNewWorkButKeepsProbes) {
  test_context t;
  t.ctx.ready = true;
  t.ctx.draining = true;
  for (auto [m, p] : std::vector<std::pair<verb, const char*>>{{verb::get, "/v1/models"}, {verb::get, "/nope"}, {verb::get, "/v1/completions"}}) {
    auto res = dispatch(t.ctx, m, p);
    EXPECT_EQ(res.result(), http::status::service_unavailable) << p;
    EXPECT_EQ(error_of(res.body()).at("message"), "the server is shutting down") << p;
  }
  EXPECT_EQ(dispatch(t.ctx, verb::get, "/health").result(), http::status::ok);
  EXPECT_EQ(dispatch(t.ctx, verb::get, "/").result(), http::status::ok) << "the chat page is public";
  auto res = dispatch(t.ctx, verb::get, "/ready");
  EXPECT_EQ(res.result(), http::status::service_unavailable);
  EXPECT_EQ(error_of(res.body()).at("message"), "the server is shutting down");
  EXPECT_EQ(dispatch(t.ctx, verb::post, "/health").result(), http::status::method_not_allowed) << "a public path keeps its 405";
  EXPECT_EQ(dispatch(t.ctx, verb::options, "/v1/models").result(), http::status::no_content);
}

TEST(Router, ChatPageFollowsDisableUi) {
  test_context on;
  auto res = dispatch(on.ctx, verb::get, "/");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_TRUE(res[http::field::content_type].starts_with("text/html"));
  EXPECT_EQ(dispatch(on.ctx, verb::get, "/ui/no-such-file.js").result(), http::status::not_found);
  cli::serve_options o;
  o.disable_ui = true;
  test_context off(o);
  res = dispatch(off.ctx, verb::get, "/");
  EXPECT_EQ(res.result(), http::status::method_not_allowed) << "only TGI's POST / is left";
  EXPECT_EQ(res[http::field::allow], "POST");
}

TEST(Router, AddedRoutesGetTheirParameters) {
  test_context t;
  std::string seen;
  t.ctx.routes.add({{verb::get}, "/v1/things/{id}", route_auth::api_key,
                    [&seen](server_context&, http_exchange& ex, http_io& io, const route_params& p) -> boost::asio::awaitable<void> {
                      seen = std::string(p.get("id"));
                      co_await io.write_response(ex, make_json_response(http::status::ok, "{}", ex.req.version()));
                    }});
  EXPECT_EQ(dispatch(t.ctx, verb::get, "/v1/things/t-1?q=2").result(), http::status::ok);
  EXPECT_EQ(seen, "t-1");
  EXPECT_EQ(dispatch(t.ctx, verb::head, "/v1/things/t-2").result(), http::status::ok);
  EXPECT_EQ(seen, "t-2");
  EXPECT_EQ(dispatch(t.ctx, verb::get, "/v1/things/").result(), http::status::not_found);
}

TEST(Router, WebSocketUpgradeRoute) {
  test_context t;
  http_exchange ex;
  ex.req.version(11);
  ex.req.target("/v1/responses?x=1");
  EXPECT_FALSE(check_ws_upgrade(t.ctx, ex));
  ex.req.target("/v1/chat/completions");
  auto denial = check_ws_upgrade(t.ctx, ex);
  ASSERT_TRUE(denial);
  EXPECT_EQ(denial->result(), http::status::not_found);
  EXPECT_EQ(error_of(denial->body()).at("message"), "WebSocket is served on GET /v1/responses only");
  t.ctx.draining = true;
  ex.req.target("/v1/responses");
  denial = check_ws_upgrade(t.ctx, ex);
  ASSERT_TRUE(denial);
  EXPECT_EQ(denial->result(), http::status::service_unavailable);
}

}  // namespace
}  // namespace spate
