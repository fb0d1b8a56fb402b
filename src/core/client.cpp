#include "dblock/client.hpp"

#include <algorithm>

#include "core/client_core.hpp"
#include "core/transport_check.hpp"
#include "core/validate.hpp"
#include "dblock/errors.hpp"

namespace dblock {

std::shared_ptr<Client> Client::open(std::string_view url_text, ClientOptions options) {
  auto url = detail::parse_url(url_text);
  detail::parse_table_name(options.table);
  if (options.pool_size == 0) throw UsageError("bad client options: pool_size must be at least 1");
  if (options.connect_timeout.count() <= 0 || options.statement_timeout.count() <= 0)
    throw UsageError("bad client options: timeouts must be positive");
  auto backend = detail::open_backend(url, options);
  auto core = std::make_shared<detail::ClientCore>(std::move(url), std::move(options), std::move(backend));
  return std::shared_ptr<Client>(new Client(std::move(core)));
}

Client::Client(std::shared_ptr<detail::ClientCore> core) noexcept : core_(std::move(core)) {}
// Its Locks and Leases may outlive it (they share the core), but its asynchronous acquires end
// with it: none is left waiting for a Client its service has closed.
Client::~Client() { core_->cancel_pending(); }

void detail::check_lock_options(const LockOptions& options, Strategy strategy) {
  if (options.ttl.count() <= 0) throw UsageError("bad lock options: ttl must be positive");
  if (options.renew_every && (options.renew_every->count() <= 0 || *options.renew_every >= options.ttl))
    throw UsageError("bad lock options: renew_every must be positive and shorter than the ttl");
  if (options.hold_at_least) {
    if (options.hold_at_least->count() <= 0) throw UsageError("bad lock options: hold_at_least must be positive");
    if (!is_lease(strategy))
      throw UsageError("bad lock options: hold_at_least needs a lease strategy (insert, optimistic, redis, redlock); " +
                       std::string(to_string(strategy)) + " frees its lock when its connection or session ends");
  }
  if (options.permits == 0 || options.permits > max_permits)
    throw UsageError("bad lock options: permits must be 1 to " + std::to_string(max_permits) + ", not " +
                     std::to_string(options.permits));
}

void Client::check_lock(std::string_view url, const std::string& name, const LockOptions& options) {
  const auto offer = detail::offer_of(detail::parse_url(url));
  const auto strategy = options.strategy.value_or(offer.strategies.front());
  if (std::find(offer.strategies.begin(), offer.strategies.end(), strategy) == offer.strategies.end())
    throw UsageError(detail::not_offered(strategy, offer.backend, offer.strategies));
  detail::validate_name(name);
  detail::check_lock_options(options, strategy);
}

Lock Client::lock(std::string name, LockOptions options) {
  detail::validate_name(name);
  core_->backend->check_name(name);
  auto strategy = options.strategy.value_or(core_->backend->strategies().front());
  detail::check_lock_options(options, strategy);
  auto& driver = core_->driver(strategy);
  auto shapes = core_->backend->shapes(strategy);
  if (options.permits > 1 && !shapes.semaphore)
    throw UsageError("strategy " + std::string(to_string(strategy)) + " does not offer semaphores (permits " +
                     std::to_string(options.permits) + ")");
  auto state = std::make_shared<detail::LockState>();
  state->core = core_;
  state->spec = detail::LockSpec{std::move(name), std::move(options), strategy, &driver, shapes};
  return Lock(std::move(state));
}

std::vector<std::string> Client::migrate() { return core_->backend->migrate(); }

std::size_t Client::sweep(std::size_t batch) {
  if (batch == 0) throw UsageError("bad sweep batch: must be at least 1");
  auto removed = core_->backend->sweep(batch);
  core_->reporter.swept(removed);
  return removed;
}

std::vector<LeaseInfo> Client::list() { return core_->list(); }

bool Client::force_release(const std::string& name) {
  detail::validate_name(name);
  core_->backend->check_name(name);
  return core_->backend->force_release(name);
}

std::vector<SettingCheck> Client::check_settings() {
  auto checks = core_->backend->check_settings();
  if (auto t = core_->backend->transport()) checks.push_back(detail::transport_check(core_->url, *t));
  return checks;
}

ClientStats Client::stats() const noexcept { return core_->reporter.stats(); }

std::string_view Client::backend() const noexcept { return core_->backend->name(); }
std::vector<Strategy> Client::strategies() const { return core_->backend->strategies(); }
std::string Client::url() const { return core_->url.redacted(); }
const std::string& Client::identity() const noexcept { return core_->identity; }

}  // namespace dblock
