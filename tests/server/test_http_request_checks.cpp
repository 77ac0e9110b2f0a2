// RFC 9112 head checks (server/http_request_checks.h) and CORS
// (server/cors.h): pure functions, no sockets.
#include "server/http_request_checks.h"

#include <gtest/gtest.h>

#include "server/cors.h"

namespace spate {
namespace {

TEST(FindHeadEnd, FindsTheBlankLine) {
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY"), 27u);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\nHost: a\n\n"), 24u);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n"), std::string_view::npos);
  EXPECT_EQ(find_head_end("\r\nGET / HTTP/1.1\r\n\r\n"), 20u) << "leading empty lines are skipped";
  EXPECT_EQ(find_head_end(""), std::string_view::npos);
  EXPECT_EQ(find_head_end("\r\n\r\n"), std::string_view::npos);
}

TEST(HasObsFold, DetectsContinuationLines) {
  EXPECT_FALSE(has_obs_fold("GET / HTTP/1.1\r\nHost: a\r\nX: b c\r\n\r\n"));
  EXPECT_TRUE(has_obs_fold("GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n"));
  EXPECT_TRUE(has_obs_fold("GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n"));
  EXPECT_TRUE(has_obs_fold("GET / HTTP/1.1\r\n Host: a\r\n\r\n")) << "whitespace before the first field";
  EXPECT_FALSE(has_obs_fold("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"));
}

http::request_header<> head(unsigned version, std::vector<std::pair<std::string, std::string>> fields) {
  http::request_header<> h;
  h.version(version);
  h.method(http::verb::post);
  h.target("/v1/completions");
  for (auto& [k, v] : fields) h.insert(k, v);
  return h;
}

TEST(CheckRequestHead, HostAndExpect) {
  EXPECT_FALSE(check_request_head(head(11, {{"Host", "a"}})));
  auto e = check_request_head(head(11, {}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, http::status::bad_request);
  EXPECT_NE(e->message.find("Host"), std::string::npos);
  EXPECT_TRUE(check_request_head(head(11, {{"Host", "a"}, {"Host", "b"}})));
  EXPECT_FALSE(check_request_head(head(10, {}))) << "HTTP/1.0 needs no Host";
  EXPECT_FALSE(check_request_head(head(11, {{"Host", "a"}, {"Expect", "100-Continue"}})));
  EXPECT_TRUE(expects_continue(head(11, {{"Host", "a"}, {"Expect", "100-continue"}})));
  EXPECT_FALSE(expects_continue(head(10, {{"Expect", "100-continue"}})));
  e = check_request_head(head(11, {{"Host", "a"}, {"Expect", "fancy"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, http::status::expectation_failed);
  EXPECT_FALSE(check_request_head(head(10, {{"Expect", "fancy"}}))) << "HTTP/1.0 Expect is ignored";
}

// Request smuggling (issue 32): a head whose body could be read two ways is
// refused before any body byte is read.
TEST(CheckTransferEncoding, OnlyAFinalChunkedAloneIsAccepted) {
  EXPECT_FALSE(check_request_head(head(11, {{"Host", "a"}, {"Transfer-Encoding", "chunked"}})));
  EXPECT_FALSE(check_request_head(head(11, {{"Host", "a"}, {"Transfer-Encoding", "Chunked"}})));
  EXPECT_FALSE(check_request_head(head(11, {{"Host", "a"}, {"Transfer-Encoding", " chunked "}})));
  EXPECT_FALSE(check_request_head(head(11, {{"Host", "a"}})));
  for (const char* te : {"identity", "gzip", "xchunked", "chunked, identity", "chunked,", "chunkedx", "chunked;a=b",
                         "chunked, chunked", ",chunked", ""}) {
    const auto e = check_request_head(head(11, {{"Host", "a"}, {"Transfer-Encoding", te}}));
    ASSERT_TRUE(e) << te;
    EXPECT_EQ(e->status, http::status::bad_request) << te;
    EXPECT_NE(e->message.find("Transfer-Encoding"), std::string::npos) << te;
  }
  // A coding we do not decode before a final chunked: 501 (RFC 9112 6.1).
  const auto gz = check_request_head(head(11, {{"Host", "a"}, {"Transfer-Encoding", "gzip, chunked"}}));
  ASSERT_TRUE(gz);
  EXPECT_EQ(gz->status, http::status::not_implemented);
}

TEST(CheckTransferEncoding, FieldsCombineInOrder) {
  // Two fields are one list: "chunked" then "identity" ends in identity.
  auto e = check_request_head(head(11, {{"Host", "a"}, {"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "identity"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, http::status::bad_request);
  // Non-adjacent fields are found too.
  e = check_request_head(head(11, {{"Transfer-Encoding", "chunked"}, {"Host", "a"}, {"Transfer-Encoding", "identity"}}));
  ASSERT_TRUE(e);
  e = check_request_head(head(11, {{"Host", "a"}, {"Transfer-Encoding", "identity"}, {"X-A", "b"}, {"Transfer-Encoding", "chunked"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, http::status::not_implemented);
}

TEST(CheckTransferEncoding, WithContentLengthOrInHttp10IsRefused) {
  auto e = check_request_head(head(11, {{"Host", "a"}, {"Transfer-Encoding", "chunked"}, {"Content-Length", "5"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, http::status::bad_request);
  EXPECT_NE(e->message.find("Content-Length"), std::string::npos);
  e = check_request_head(head(10, {{"Transfer-Encoding", "chunked"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, http::status::bad_request);
  EXPECT_FALSE(check_request_head(head(10, {{"Content-Length", "5"}})));
}

// What Beast's parser makes of the wire bytes, then our check: the smuggling
// repro of issue 32 is refused on its head.
TEST(CheckTransferEncoding, TheSmugglingReproIsRefusedOnItsHead) {
  const std::string wire =
      "GET /health HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n"
      "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}";
  const size_t end = find_head_end(wire);
  ASSERT_NE(end, std::string_view::npos);
  http::request_parser<http::string_body> p;
  boost::system::error_code ec;
  p.put(boost::asio::buffer(wire.data(), end), ec);
  ASSERT_FALSE(ec);
  ASSERT_TRUE(p.is_header_done());
  const auto e = check_request_head(p.get().base());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, http::status::bad_request);
}

http::request_header<> preflight_req(std::string origin, std::string method, std::string headers = "") {
  http::request_header<> h;
  h.version(11);
  h.method(http::verb::options);
  h.target("/v1/chat/completions");
  h.set(http::field::origin, origin);
  h.set(http::field::access_control_request_method, method);
  if (!headers.empty()) h.set(http::field::access_control_request_headers, headers);
  return h;
}

TEST(Cors, DefaultAllowsAnyOriginWithStar) {
  const cors_policy p{cors_config{}};
  const auto req = preflight_req("http://x.example", "POST", "Authorization, X-Custom");
  ASSERT_TRUE(cors_policy::is_preflight(req));
  const auto res = p.preflight(req);
  EXPECT_EQ(res.result(), http::status::no_content);
  EXPECT_EQ(res[http::field::access_control_allow_origin], "*");
  EXPECT_EQ(res[http::field::access_control_allow_headers], "Authorization, X-Custom");
  EXPECT_EQ(res[http::field::access_control_max_age], "600");
  EXPECT_EQ(res.count(http::field::access_control_allow_credentials), 0u);
}

TEST(Cors, ListedOriginsMethodsAndHeaders) {
  cors_config c;
  c.allowed_origins = {"https://a.example"};
  c.allowed_methods = {"GET", "POST"};
  c.allowed_headers = {"Authorization"};
  c.allow_credentials = true;
  const cors_policy p{c};
  auto res = p.preflight(preflight_req("https://a.example", "POST", "authorization, content-type"));
  EXPECT_EQ(res.result(), http::status::no_content);
  EXPECT_EQ(res[http::field::access_control_allow_origin], "https://a.example");
  EXPECT_EQ(res[http::field::vary], "Origin");
  EXPECT_EQ(res[http::field::access_control_allow_credentials], "true");
  EXPECT_EQ(res[http::field::access_control_allow_methods], "GET, POST");
  EXPECT_EQ(p.preflight(preflight_req("https://b.example", "POST")).result(), http::status::bad_request);
  EXPECT_EQ(p.preflight(preflight_req("https://a.example", "DELETE")).result(), http::status::bad_request);
  res = p.preflight(preflight_req("https://a.example", "POST", "x-other"));
  EXPECT_EQ(res.result(), http::status::bad_request);
  EXPECT_NE(res.body().find("x-other"), std::string::npos);

  http::request_header<> get;
  get.version(11);
  get.method(http::verb::get);
  get.set(http::field::origin, "https://a.example");
  http::response<http::string_body> ok{http::status::ok, 11};
  p.decorate(get, ok);
  EXPECT_EQ(ok[http::field::access_control_allow_origin], "https://a.example");
  get.set(http::field::origin, "https://b.example");
  http::response<http::string_body> other{http::status::ok, 11};
  p.decorate(get, other);
  EXPECT_EQ(other.count(http::field::access_control_allow_origin), 0u);
  EXPECT_FALSE(cors_policy::is_preflight(get));
}

TEST(Cors, FlagSyntaxIsAJsonListOfStrings) {
  std::vector<std::string> out;
  EXPECT_EQ(parse_json_string_list(R"(["*"])", "--allowed-origins", out), "");
  EXPECT_EQ(out, std::vector<std::string>{"*"});
  EXPECT_EQ(parse_json_string_list(R"(["a", "b"])", "--allowed-origins", out), "");
  EXPECT_EQ(out.size(), 2u);
  for (const char* bad : {"*", "[1]", "{}", "[\"a\"", ""}) {
    EXPECT_NE(parse_json_string_list(bad, "--allowed-origins", out).find("--allowed-origins must be a JSON list"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace spate
