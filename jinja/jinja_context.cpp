#include "jinja/jinja_context.h"

#include "jinja/jinja_error.h"

namespace spate::jinja {

value* frame::find_local(std::string_view name) {
  for (auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void frame::set(std::string_view name, value v) {
  if (value* slot = find_local(name)) {
    *slot = std::move(v);
    return;
  }
  vars.emplace_back(std::string(name), std::move(v));
}

render_context::~render_context() {
  // Break reference cycles (namespace -> value -> namespace, frame -> macro -> frame,
  // loop -> changed() arguments -> loop). Moving the contents out first keeps destruction
  // from recursing through chains of these objects.
  std::vector<value> graveyard;
  for (auto& ns : namespaces_)
    for (auto& [k, v] : ns->attrs) graveyard.push_back(std::move(v));
  for (auto& f : frames_) {
    for (auto& [k, v] : f->vars) graveyard.push_back(std::move(v));
    f->vars.clear();
  }
  for (auto& l : loops_) {
    graveyard.push_back(std::move(l->last_changed));
    graveyard.push_back(std::move(l->prev));
    graveyard.push_back(std::move(l->cur));
    l->lookahead.clear();
  }
  for (auto& ns : namespaces_) ns->attrs.clear();
}

void render_context::track(const std::shared_ptr<frame>& f) {
  if (f->tracked) return;
  f->tracked = true;
  frames_.push_back(f);
  charge(512);  // kept alive until the render ends: count it against the memory budget
}

void render_context::track(const std::shared_ptr<loop_obj>& l) {
  if (l->tracked) return;
  l->tracked = true;
  loops_.push_back(l);
  charge(256);
}

void render_context::track(const std::shared_ptr<ns_obj>& ns) {
  namespaces_.push_back(ns);
  charge(256);
}

void render_context::step() {
  if (++steps_ > limits_.max_steps)
    throw limit_error("template exceeded the limit of " + std::to_string(limits_.max_steps) +
                      " steps (statements, loop iterations and calls)");
}

void render_context::charge(std::size_t bytes) {
  built_ += bytes;
  if (built_ > limits_.max_built_bytes)
    throw limit_error("template exceeded the limit of " + std::to_string(limits_.max_built_bytes) +
                      " bytes of strings and lists built");
}

void render_context::check_string(std::size_t bytes) const {
  if (bytes > limits_.max_string_bytes)
    throw limit_error("template built a string longer than the limit of " + std::to_string(limits_.max_string_bytes) +
                      " bytes");
}

}  // namespace spate::jinja
