#include "jinja/chat_template.h"

#include <utility>
#include <vector>

#include "jinja/jinja_error.h"
#include "jinja/jinja_render.h"
#include "jinja/jinja_unicode.h"

namespace spate {

chat_template::chat_template(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)), bos_token_(std::move(bos_token)), eos_token_(std::move(eos_token)) {
  try {
    tpl_ = std::make_unique<const jinja::compiled_template>(source_);
  } catch (const jinja::syntax_error& e) {
    throw chat_template_error("syntax error in chat template, line " + std::to_string(e.line) + ": " + e.what());
  } catch (const std::exception& e) {
    throw chat_template_error(std::string("invalid chat template: ") + e.what());
  }
}

chat_template::~chat_template() = default;
chat_template::chat_template(chat_template&&) noexcept = default;
chat_template& chat_template::operator=(chat_template&&) noexcept = default;

std::string chat_template::render(const boost::json::array& messages, const chat_template_options& opts) const {
  static const jinja::render_limits limits;
  jinja::render_context ctx(limits, opts.now_unix_s);
  try {
    std::vector<std::pair<std::string, jinja::value>> vars;
    auto put = [&](const std::string& name, jinja::value v) {
      for (auto& [k, x] : vars)
        if (k == name) {
          x = std::move(v);
          return;
        }
      vars.emplace_back(name, std::move(v));
    };
    put("tools", jinja::value::none());
    put("documents", jinja::value::none());
    for (const auto& kv : opts.extra_context)
      put(jinja::unicode::sanitize_utf8(std::string_view(kv.key().data(), kv.key().size())),
          jinja::from_json(kv.value()));
    std::vector<jinja::value> msgs;
    msgs.reserve(messages.size());
    for (const auto& m : messages) msgs.push_back(jinja::from_json(m));
    put("messages", jinja::value::list(std::move(msgs)));
    put("bos_token", jinja::value::string(jinja::unicode::sanitize_utf8(bos_token_)));
    put("eos_token", jinja::value::string(jinja::unicode::sanitize_utf8(eos_token_)));
    put("add_generation_prompt", jinja::value::boolean(opts.add_generation_prompt));
    return tpl_->render(ctx, std::move(vars));
  } catch (const jinja::raised_error& e) {
    throw chat_template_error(e.what());
  } catch (const jinja::runtime_error& e) {
    if (e.line <= 0) throw chat_template_error(e.what());
    throw chat_template_error("template line " + std::to_string(e.line) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw chat_template_error("out of memory while rendering the chat template");
  } catch (const chat_template_error&) {
    throw;
  } catch (const std::exception& e) {
    throw chat_template_error(std::string("rendering failed: ") + e.what());
  }
}

}  // namespace spate
