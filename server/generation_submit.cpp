#include "server/generation_submit.h"

#include "engine/engine_api.h"
#include "server/metrics.h"

namespace spate {

std::optional<api::api_error> submit_generation(server_context& ctx, const model_lease& m, const prepared_generation& g,
                                                const std::shared_ptr<request_stream>& stream, std::vector<int64_t>& ids) {
  std::vector<engine_request> reqs(static_cast<size_t>(g.n_choices()));
  for (int32_t i = 0; i < g.n_choices(); ++i) {
    engine_request& er = reqs[static_cast<size_t>(i)];
    er.prompt = g.prompt_of_choice(i);
    er.params = g.params;
    const int32_t sample = i % g.n;  // each prompt's samples use seed, seed + 1, ...
    if (er.params.seed && sample > 0) er.params.seed = *er.params.seed + static_cast<uint64_t>(sample);
  }
  return submit_all(ctx, m, std::move(reqs), stream, ids, "n");
}

std::optional<api::api_error> submit_all(server_context& ctx, const model_lease& m, std::vector<engine_request> reqs,
                                         const std::shared_ptr<request_stream>& stream, std::vector<int64_t>& ids,
                                         std::string_view param) {
  ids.clear();
  if (const auto bound = static_cast<size_t>(m.eng().max_queued_requests()); reqs.size() > bound) {
    const std::string limit = std::to_string(bound);
    return api::api_error{400,
                          "this request needs " + std::to_string(reqs.size()) + " engine requests at once ('" + std::string(param) +
                              "'), more than this server ever queues (--max-queued-requests " + limit + "); send at most " + limit + " per request",
                          "invalid_request_error", std::string(param), ""};
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].adapter = m.adapter_slot();
    reqs[i].cache_salt = m.cache_salt();
    // Generated tokens are counted as the engine delivers them (engine
    // thread), before the client can see them, cancelled requests included.
    reqs[i].on_event = [&metrics = m.metrics(), to_stream = stream->make_callback(static_cast<int32_t>(i))](const engine_event& e) {
      if (e.type == engine_event::kind::tokens) metrics.count_generated_tokens(static_cast<int64_t>(e.token_ids.size()));
      to_stream(e);
    };
    const submit_result sr = m.eng().submit(std::move(reqs[i]));
    if (sr.ok()) {
      ids.push_back(sr.id);
      continue;
    }
    cancel_generation(m, ids);
    ids.clear();
    return refusal_error(ctx, sr);
  }
  return std::nullopt;
}

api::api_error refusal_error(const server_context& ctx, const submit_result& sr) {
  api::api_error e;
  e.message = ctx.describe_engine_error ? ctx.describe_engine_error(sr.error) : sr.error;
  switch (sr.why) {
    case submit_result::refusal::queue_full:
      e.status = 429;
      e.type = "rate_limit_error";
      e.code = "queue_full";
      break;
    case submit_result::refusal::stopped:
      e.status = 503;
      e.type = "server_error";
      e.code = "shutting_down";
      break;
    case submit_result::refusal::context_length:
      e.status = 400;
      e.code = "context_length_exceeded";
      break;
    default:
      e.status = 400;
      break;
  }
  return e;
}

void cancel_generation(const model_lease& m, const std::vector<int64_t>& ids) {
  for (int64_t id : ids) m.eng().cancel(id);
}

const char* rejection_reason(const api::api_error& e) {
  if (e.code == "context_length_exceeded") return "context_length";
  if (e.status == 429) return "queue_full";
  return "invalid";
}

}  // namespace spate
