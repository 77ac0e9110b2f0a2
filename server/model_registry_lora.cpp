// model_registry's LoRA adapters: entries whose spec.parent names their base.
// An adapter is installed into its base's loaded model on the registry thread
// (file reading, packing) the first time a request or a load asks for it
// after the base loaded; a lease on it holds a lease on the base.
#include <ctime>
#include <spdlog/spdlog.h>

#include "server/model_registry.h"
#include "server/model_registry_entry.h"

namespace spate {

namespace {

api::api_error adapter_failed(const std::string& id, const std::string& why) {
  return api::api_error{500, "The LoRA adapter '" + id + "' cannot be loaded: " + why, "server_error", "model", "model_load_failed"};
}

}  // namespace

model_status model_registry::status_locked(const entry& e) const {
  if (e.spec.parent.empty() || e.status == model_status::error) return e.status;
  const entry* base = find_entry(e.spec.parent);
  if (!base) return model_status::unloaded;
  if (base->status == model_status::loading) return model_status::loading;
  if (base->status == model_status::loaded && base->model && base->model->adapter(e.spec.id)) return model_status::loaded;
  return model_status::unloaded;
}

model_acquired model_registry::make_adapter_lease(model_handle base, const std::string& adapter_id, lora_slot a) {
  std::lock_guard lock(mu_);
  entry* e = find_any_entry(adapter_id);
  if (!e) return model_acquired{nullptr, adapter_failed(adapter_id, "it was unloaded")};
  ++e->n_leases;
  e->last_used = ++use_clock_;
  return model_acquired{std::make_shared<model_lease>(*this, adapter_id, std::move(base), *e->metrics, a), std::nullopt};
}

std::optional<model_acquired> model_registry::finish_adapter_acquire(model_handle base, const std::string& adapter_id,
                                                                     model_acquired_fn on_ready, bool on_registry_thread) {
  if (auto slot = base->model_->adapter(adapter_id)) return make_adapter_lease(std::move(base), adapter_id, *slot);
  auto install = [this, base, adapter_id]() -> model_acquired {
    std::string path;
    {
      std::lock_guard lock(mu_);
      const entry* a = find_entry(adapter_id);
      if (!a) return model_acquired{nullptr, adapter_failed(adapter_id, "it was unloaded")};
      path = a->spec.path;
    }
    try {
      base->model_->install_adapter(adapter_id, path);
    } catch (const std::exception& ex) {
      std::lock_guard lock(mu_);
      if (entry* a = find_entry(adapter_id)) {
        a->status = model_status::error;
        a->error = ex.what();
      }
      spdlog::error("LoRA adapter '{}': {}", adapter_id, ex.what());
      return model_acquired{nullptr, api::api_error{400, ex.what(), "invalid_request_error", "lora_path", "lora_load_failed"}};
    }
    spdlog::info("LoRA adapter '{}' loaded into '{}' from {}", adapter_id, base->id(), path);
    const auto slot = base->model_->adapter(adapter_id);
    if (!slot) return model_acquired{nullptr, adapter_failed(adapter_id, "its slot was freed")};
    return make_adapter_lease(base, adapter_id, *slot);
  };
  if (on_registry_thread) return install();
  {
    std::lock_guard lock(mu_);
    jobs_.push_back([install, on_ready] { on_ready(install()); });
  }
  cv_.notify_all();
  return std::nullopt;
}

std::optional<model_acquired> model_registry::acquire_adapter_locked(std::unique_lock<std::mutex>& lock, entry& a,
                                                                     model_acquired_fn on_ready) {
  if (stopping_) return model_acquired{nullptr, api::api_error{503, "the server is shutting down", "server_error", "", ""}};
  if (a.status == model_status::error) return model_acquired{nullptr, adapter_failed(a.spec.id, a.error)};
  entry* base = find_entry(a.spec.parent);
  if (!base) return model_acquired{nullptr, adapter_failed(a.spec.id, "its base model '" + a.spec.parent + "' is not served")};
  const std::string id = a.spec.id;
  ++a.n_waiting;
  auto wrap = [this, id, on_ready](model_acquired got) {
    {
      std::lock_guard l(mu_);
      if (entry* e = find_any_entry(id)) --e->n_waiting;
    }
    if (!got.lease) {
      on_ready(std::move(got));
      return;
    }
    if (auto now = finish_adapter_acquire(std::move(got.lease), id, on_ready, /*on_registry_thread=*/true)) on_ready(std::move(*now));
  };
  std::optional<model_acquired> now = acquire_locked(lock, *base, wrap, /*for_request=*/true);
  if (!now) return std::nullopt;  // wrap runs when the base is loaded
  --a.n_waiting;
  if (!now->lease) return now;
  lock.unlock();
  std::optional<model_acquired> out = finish_adapter_acquire(std::move(now->lease), id, on_ready, /*on_registry_thread=*/false);
  lock.lock();
  return out;
}

std::optional<api::api_error> model_registry::add_adapter(model_spec spec, std::function<void(std::optional<api::api_error>)> on_done) {
  std::unique_lock lock(mu_);
  if (stopping_) return api::api_error{503, "the server is shutting down", "server_error", "", ""};
  if (spec.parent.empty()) spec.parent = default_id_;
  const entry* base = find_entry(spec.parent);
  if (!base || !base->spec.parent.empty())
    return api::api_error{404, "The base model '" + spec.parent + "' does not exist", "not_found_error", "base_model_name", "model_not_found"};
  if (find_entry(spec.id))
    return api::api_error{400, "The model or LoRA adapter '" + spec.id + "' has already been loaded", "invalid_request_error", "lora_name", ""};
  entry* a = find_any_entry(spec.id);
  if (a && a->n_leases > 0)
    return api::api_error{400, "The LoRA adapter '" + spec.id + "' is still being unloaded (requests are running); try again", "invalid_request_error",
                          "lora_name", ""};
  if (!a) {
    auto e = std::make_unique<entry>();
    e->metrics = std::make_unique<server_metrics>(spec.id, base->spec.max_model_len);
    a = e.get();
    entries_.push_back(std::move(e));
  }
  a->removed = false;
  a->status = model_status::unloaded;
  a->error.clear();
  a->spec = std::move(spec);
  const std::string id = a->spec.id;
  auto finish = [this, id, on_done](model_acquired got) {
    if (got.error) {
      std::lock_guard l(mu_);
      if (entry* e = find_entry(id)) e->removed = true;  // a failed load is not kept
    }
    on_done(got.error);
  };
  std::optional<model_acquired> now = acquire_adapter_locked(lock, *a, finish);
  if (!now) return std::nullopt;
  lock.unlock();
  finish(std::move(*now));  // drops the lease outside the lock
  return std::nullopt;
}

std::optional<api::api_error> model_registry::remove_adapter(std::string_view name) {
  {
    std::lock_guard lock(mu_);
    entry* a = find_entry(name);
    if (!a || a->spec.parent.empty())
      return api::api_error{404, "The LoRA adapter '" + std::string(name) + "' cannot be found", "not_found_error", "lora_name", "model_not_found"};
    a->removed = true;
    spdlog::info("LoRA adapter '{}' unloaded{}", a->spec.id, a->n_leases > 0 ? " (its slot is freed once its requests finish)" : "");
    if (a->n_leases == 0) queue_adapter_removal_locked(*a);
  }
  cv_.notify_all();
  return std::nullopt;
}

void model_registry::queue_adapter_removal_locked(const entry& a) {
  jobs_.push_back([this, name = a.spec.id, base_id = a.spec.parent] {
    std::shared_ptr<serving_model> m;
    {
      std::lock_guard lock(mu_);
      const entry* base = find_entry(base_id);
      const entry* again = find_entry(name);  // added back meanwhile: keep it
      if (!base || !base->model || again) return;
      m = base->model;
    }
    m->remove_adapter(name);
  });
}

void model_registry::run_jobs(std::unique_lock<std::mutex>& lock) {
  while (!jobs_.empty()) {
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // its captures (leases) are released outside the lock
    lock.lock();
  }
}

void model_registry::refresh_lora_info() {
  std::lock_guard lock(mu_);
  for (auto& base : entries_) {
    if (!base->spec.parent.empty()) continue;
    std::string running, waiting;
    bool any = false;
    for (const auto& a : entries_) {
      if (a->spec.parent != base->spec.id || a->removed) continue;
      any = true;
      if (a->n_leases > 0) running += (running.empty() ? "" : ",") + a->spec.id;
      if (a->n_waiting > 0) waiting += (waiting.empty() ? "" : ",") + a->spec.id;
    }
    if (!any && !base->model) continue;
    const int32_t max_lora = base->model ? base->model->max_loras : 0;
    if (any || max_lora > 0) base->metrics->set_lora_info(running, waiting, max_lora, static_cast<double>(std::time(nullptr)));
  }
}

}  // namespace spate
