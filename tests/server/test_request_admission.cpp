// Head-level admission (server/request_admission.h): Origin (403) and API key
// (401) decided before the body is read. Pure functions, no sockets.
#include "server/request_admission.h"

#include "server/server_context.h"

#include <gtest/gtest.h>

namespace spate {
namespace {

http::request_header<> req(http::verb m, std::string target, std::vector<std::pair<std::string, std::string>> fields) {
  http::request_header<> h;
  h.version(11);
  h.method(m);
  h.target(target);
  h.set(http::field::host, "spate.example:8000");
  for (auto& [k, v] : fields) h.insert(k, v);
  return h;
}

// The server's own route tables, with and without the chat page: they say
// which paths are public.
const route_table ui_on = api_routes(true);
const route_table ui_off = api_routes(false);

const std::vector<std::string> k_keys = {"k1", "other-key"};
const std::vector<std::string> k_no_keys = {};

cors_policy listed() { return cors_policy{cors_config{{"https://app.example"}, {"*"}, {"*"}, false}}; }

TEST(AdmitRequestHead, KeyOnTheHead) {
  const cors_policy any{cors_config{}};
  auto d = admit_request_head(req(http::verb::post, "/v1/completions", {}), k_keys, any, ui_on);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, http::status::unauthorized);
  EXPECT_EQ(d->code, "invalid_api_key");
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/completions", {{"Authorization", "Bearer k1"}}), k_keys, any, ui_on));
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/completions", {{"Authorization", "bearer other-key"}}), k_keys, any, ui_on));
  for (const char* bad : {"Bearer k2", "Bearer  k1", "Basic k1", "k1", "Bearer ", "Bearer k"}) {
    EXPECT_TRUE(admit_request_head(req(http::verb::post, "/v1/completions", {{"Authorization", bad}}), k_keys, any, ui_on)) << bad;
  }
  // No key configured: everything is admitted.
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/completions", {}), k_no_keys, any, ui_on));
  // Unknown routes need the key too (no route map for the unauthenticated).
  EXPECT_TRUE(admit_request_head(req(http::verb::get, "/nope", {}), k_keys, any, ui_on));
}

TEST(AdmitRequestHead, XApiKeyOnAnthropicsRoutesOnly) {
  const cors_policy any{cors_config{}};
  for (auto [m, path] : {std::pair{http::verb::post, "/v1/messages"}, {http::verb::post, "/v1/messages/count_tokens"},
                         {http::verb::get, "/v1/models"}, {http::verb::get, "/v1/models/org/m?x=1"}}) {
    EXPECT_FALSE(admit_request_head(req(m, path, {{"x-api-key", "k1"}}), k_keys, any, ui_on)) << path;
    EXPECT_FALSE(admit_request_head(req(m, path, {{"X-Api-Key", "other-key"}}), k_keys, any, ui_on)) << path;
    EXPECT_FALSE(admit_request_head(req(m, path, {{"Authorization", "Bearer k1"}}), k_keys, any, ui_on)) << path;
    EXPECT_TRUE(admit_request_head(req(m, path, {{"x-api-key", "k2"}}), k_keys, any, ui_on)) << path;
    EXPECT_TRUE(admit_request_head(req(m, path, {{"x-api-key", "Bearer k1"}}), k_keys, any, ui_on)) << path;
  }
  // Elsewhere only Authorization carries the key.
  for (auto [m, path] : {std::pair{http::verb::post, "/v1/chat/completions"}, {http::verb::post, "/v1/completions"},
                         {http::verb::post, "/api/chat"}, {http::verb::post, "/tokenize"}, {http::verb::post, "/models/load"},
                         {http::verb::get, "/models"}, {http::verb::get, "/nope"}}) {
    auto d = admit_request_head(req(m, path, {{"x-api-key", "k1"}}), k_keys, any, ui_on);
    ASSERT_TRUE(d) << path;
    EXPECT_EQ(d->status, http::status::unauthorized) << path;
    EXPECT_FALSE(admit_request_head(req(m, path, {{"x-api-key", "k1"}, {"Authorization", "Bearer k1"}}), k_keys, any, ui_on)) << path;
  }
  // Nor on a WebSocket upgrade (the Responses API's).
  auto d = admit_request_head(req(http::verb::get, "/v1/responses", {{"Upgrade", "websocket"}, {"Connection", "Upgrade"},
                                                                     {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                                                                     {"Sec-WebSocket-Version", "13"}, {"x-api-key", "k1"}}),
                              k_keys, any, ui_on);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, http::status::unauthorized);
}

TEST(RedactTarget, CredentialsInTheQueryNeverReachTheLog) {
  const std::vector<std::string> keys = {"sk-secret", "a b"};
  EXPECT_EQ(redact_target("/v1/models", keys), "/v1/models");
  EXPECT_EQ(redact_target("/v1/models?limit=5&after=x", keys), "/v1/models?limit=5&after=x");
  EXPECT_EQ(redact_target("/v1/chat/completions?api_key=sk-secret", keys), "/v1/chat/completions?api_key=REDACTED");
  EXPECT_EQ(redact_target("/x?key=whatever&a=1&Token=t0k&API-KEY=z&access_token=q&x-api-key=w", {}),
            "/x?key=REDACTED&a=1&Token=REDACTED&API-KEY=REDACTED&access_token=REDACTED&x-api-key=REDACTED");
  EXPECT_EQ(redact_target("/x?%61pi_key=v&password=p&auth=a", {}), "/x?%61pi_key=REDACTED&password=REDACTED&auth=REDACTED")
      << "names are compared percent-decoded";
  // A configured key under any name, percent-encoded or as a bare item.
  EXPECT_EQ(redact_target("/x?q=sk-secret&r=a%20b&s=a+b&t=sk-secre", keys), "/x?q=REDACTED&r=REDACTED&s=REDACTED&t=sk-secre");
  EXPECT_EQ(redact_target("/x?sk-secret&m=1", keys), "/x?REDACTED&m=1");
  EXPECT_EQ(redact_target("/x?sk-secret=1", keys), "/x?REDACTED=REDACTED");
  EXPECT_EQ(redact_target("/x?key=", {}), "/x?key=REDACTED");
  EXPECT_EQ(redact_target("/x?&&key=a&", {}), "/x?&&key=REDACTED&");
  EXPECT_EQ(redact_target("", keys), "");
  EXPECT_EQ(redact_target("/keys/sk-?", keys), "/keys/sk-?");
}

TEST(AdmitRequestHead, PublicRoutesAndPreflights) {
  const cors_policy any{cors_config{}};
  for (const char* path : {"/health", "/ready", "/metrics", "/health?x=1", "/", "/index.html", "/ui/chat.js"}) {
    EXPECT_FALSE(admit_request_head(req(http::verb::get, path, {}), k_keys, any, ui_on)) << path;
  }
  EXPECT_TRUE(admit_request_head(req(http::verb::get, "/", {}), k_keys, any, ui_off)) << "the chat page is off: / is not public";
  EXPECT_TRUE(admit_request_head(req(http::verb::get, "/healthz", {}), k_keys, any, ui_on));
  EXPECT_TRUE(admit_request_head(req(http::verb::get, "/v1/models", {}), k_keys, any, ui_on));
  EXPECT_FALSE(admit_request_head(
      req(http::verb::options, "/v1/completions", {{"Origin", "https://x.example"}, {"Access-Control-Request-Method", "POST"}}),
      k_keys, any, ui_on))
      << "browsers send preflights without credentials";
  EXPECT_FALSE(admit_request_head(req(http::verb::options, "/v1/completions", {}), k_keys, any, ui_on));
}

TEST(AdmitRequestHead, WhatIsServedWithoutAKeyCarriesNoBody) {
  const cors_policy any{cors_config{}};
  for (auto [m, path] : {std::pair{http::verb::get, "/health"}, {http::verb::post, "/metrics"}, {http::verb::options, "/v1/completions"},
                         {http::verb::get, "/ui/chat.js"}}) {
    for (auto body : std::vector<std::pair<std::string, std::string>>{{"Content-Length", "8000000"}, {"Transfer-Encoding", "chunked"},
                                                                     {"Content-Length", "1"}}) {
      auto d = admit_request_head(req(m, path, {body}), k_keys, any, ui_on);
      ASSERT_TRUE(d) << path << " " << body.first;
      EXPECT_EQ(d->status, http::status::payload_too_large);
      EXPECT_FALSE(admit_request_head(req(m, path, {body}), k_no_keys, any, ui_on)) << "no keys: nothing to protect";
    }
    EXPECT_FALSE(admit_request_head(req(m, path, {{"Content-Length", "0"}}), k_keys, any, ui_on)) << path;
    EXPECT_FALSE(admit_request_head(req(m, path, {{"Content-Length", "000"}}), k_keys, any, ui_on)) << path;
  }
  auto d = admit_request_head(req(http::verb::options, "/v1/completions", {{"Origin", "https://x.example"}, {"Access-Control-Request-Method", "POST"},
                                                                          {"Content-Length", "100"}}),
                              k_keys, any, ui_on);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, http::status::payload_too_large);
  // With the key the body is welcome.
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/completions", {{"Authorization", "Bearer k1"}, {"Content-Length", "100"}}),
                                  k_keys, any, ui_on));
}

TEST(AdmitRequestHead, WebSocketKeyInTheSubprotocol) {
  const cors_policy any{cors_config{}};
  const std::vector<std::pair<std::string, std::string>> upgrade = {
      {"Connection", "Upgrade"}, {"Upgrade", "websocket"}, {"Sec-WebSocket-Version", "13"}, {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}};
  auto with = [&](std::vector<std::pair<std::string, std::string>> more) {
    auto f = upgrade;
    f.insert(f.end(), more.begin(), more.end());
    return req(http::verb::get, "/v1/responses", f);
  };
  EXPECT_TRUE(admit_request_head(with({}), k_keys, any, ui_on));
  EXPECT_FALSE(admit_request_head(with({{"Authorization", "Bearer k1"}}), k_keys, any, ui_on));
  EXPECT_FALSE(admit_request_head(with({{"Sec-WebSocket-Protocol", "realtime, openai-insecure-api-key.k1"}}), k_keys, any, ui_on));
  EXPECT_TRUE(admit_request_head(with({{"Sec-WebSocket-Protocol", "realtime, openai-insecure-api-key.k9"}}), k_keys, any, ui_on));
  // The subprotocol key counts for upgrades only.
  EXPECT_TRUE(admit_request_head(req(http::verb::post, "/v1/responses", {{"Sec-WebSocket-Protocol", "openai-insecure-api-key.k1"}}),
                                 k_keys, any, ui_on));
  // A disallowed Origin on the upgrade: 403, with or without a key.
  auto d = admit_request_head(with({{"Origin", "https://evil.example"}, {"Authorization", "Bearer k1"}}), k_keys, listed(), ui_on);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, http::status::forbidden);
  d = admit_request_head(with({{"Origin", "https://evil.example"}}), k_no_keys, listed(), ui_on);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, http::status::forbidden);
  EXPECT_FALSE(admit_request_head(with({{"Origin", "https://app.example"}}), k_no_keys, listed(), ui_on));
}

TEST(AdmitRequestHead, DisallowedOriginIsRefusedBeforeWork) {
  const cors_policy p = listed();
  // A "simple" cross-origin POST needs no preflight: it must not run.
  for (const char* origin : {"https://evil.example", "null", "https://app.example.evil", "http://app.example", ""}) {
    const auto d = admit_request_head(req(http::verb::post, "/v1/completions", {{"Origin", origin}, {"Content-Type", "text/plain"}}),
                                      k_no_keys, p, ui_on);
    ASSERT_TRUE(d) << origin;
    EXPECT_EQ(d->status, http::status::forbidden) << origin;
    EXPECT_EQ(d->code, "origin_not_allowed");
  }
  // Before authentication: a keyless cross-origin request learns nothing about keys.
  auto d = admit_request_head(req(http::verb::post, "/v1/completions", {{"Origin", "https://evil.example"}}), k_keys, p, ui_on);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, http::status::forbidden);
  // Public routes too: "before any work".
  EXPECT_TRUE(admit_request_head(req(http::verb::get, "/health", {{"Origin", "https://evil.example"}}), k_no_keys, p, ui_on));
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/completions", {{"Origin", "https://app.example"}}), k_no_keys, p, ui_on));
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/completions", {}), k_no_keys, p, ui_on)) << "no Origin: not a browser's CORS request";
  // "*" allows any origin.
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/completions", {{"Origin", "null"}}), k_no_keys, cors_policy{cors_config{}}, ui_on));
}

TEST(AdmitRequestHead, SameOriginIsAlwaysAllowed) {
  const cors_policy p = listed();
  // The chat page served by spate itself posts with its own origin.
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/chat/completions", {{"Origin", "http://spate.example:8000"}}), k_no_keys, p, ui_on));
  EXPECT_FALSE(admit_request_head(req(http::verb::post, "/v1/chat/completions", {{"Origin", "https://SPATE.example:8000"}}), k_no_keys, p, ui_on));
  EXPECT_TRUE(admit_request_head(req(http::verb::post, "/v1/chat/completions", {{"Origin", "http://spate.example"}}), k_no_keys, p, ui_on));
  EXPECT_TRUE(admit_request_head(req(http::verb::post, "/v1/chat/completions", {{"Origin", "http://spate.example:8000.evil"}}), k_no_keys, p, ui_on));
  EXPECT_TRUE(admit_request_head(req(http::verb::post, "/v1/chat/completions", {{"Origin", "ftp://spate.example:8000"}}), k_no_keys, p, ui_on));
  http::request_header<> no_host = req(http::verb::post, "/v1/chat/completions", {{"Origin", "http://"}});
  no_host.erase(http::field::host);
  EXPECT_TRUE(admit_request_head(no_host, k_no_keys, p, ui_on));
  EXPECT_TRUE(is_same_origin("https://spate.example:8000", req(http::verb::get, "/", {})));
  EXPECT_FALSE(is_same_origin("https://", req(http::verb::get, "/", {})));
}

}  // namespace
}  // namespace spate
