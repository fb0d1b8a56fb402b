#include "backends/redis/redlock_nodes.hpp"

#include <poll.h>

#include <cerrno>
#include <thread>

#include "backends/redis/redis_scripts.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::redis {

namespace {
constexpr milliseconds retry_down_node_every{1000};
}

std::unique_ptr<Connection> Nodes::open(std::size_t i, milliseconds connect_timeout) {
  auto c = std::make_unique<Connection>(targets_[i], connect_timeout);
  // The scripts are loaded up front (one pipelined round trip per new connection): a call
  // that returns once a majority answered leaves the others' answers unread, and an unread
  // NOSCRIPT would mean the script silently never ran on that node (a release or an undo
  // left to the TTL). A server that refuses SCRIPT LOAD (an ACL) still gets EVAL on NOSCRIPT
  // wherever the answer is read.
  const Script* scripts[] = {&acquire_script(), &free_script(), &keep_script(), &renew_script(),
                             &fence_script()};
  c->set_timeout(connect_timeout);  // part of connecting: a hung node must not hold us longer
  for (const auto* s : scripts) c->append({"SCRIPT", "LOAD", s->text});
  for (std::size_t k = 0; k < std::size(scripts); ++k) c->read();
  c->set_timeout(targets_[i].command_timeout);
  return c;
}

Nodes::Nodes(std::vector<Target> nodes, std::size_t pool_size)
    : targets_(std::move(nodes)), pool_size_(pool_size), retry_at_(new std::atomic<Clock::rep>[targets_.size()]) {
  for (std::size_t i = 0; i < targets_.size(); ++i) retry_at_[i] = 0;
}

// Side by side, not one after another: a node behind a network that drops packets costs the
// whole connect timeout (no SYN-ACK, no reset), and five in a row made a Client::open or an
// acquire during a cut take five times the timeout (5 s for 1 s, under a real packet drop:
// docs/RELIABILITY.md, "Real partitions"). One node is opened on the caller's thread.
std::vector<std::string> Nodes::open_many(Set& s, const std::vector<std::size_t>& nodes,
                                          milliseconds connect_timeout) {
  std::vector<std::string> errors(targets_.size());
  auto open_one = [&](std::size_t i) {
    try {
      s[i] = open(i, connect_timeout.count() < 0 ? targets_[i].connect_timeout : connect_timeout);
    } catch (const std::exception& e) {  // on a thread of its own: nothing may escape
      errors[i] = e.what();
      if (errors[i].empty()) errors[i] = "connection failed";
    }
  };
  if (nodes.size() == 1) {
    open_one(nodes[0]);
    return errors;
  }
  std::vector<std::thread> threads;
  threads.reserve(nodes.size());
  for (auto i : nodes) threads.emplace_back(open_one, i);  // distinct slots of s and errors
  for (auto& t : threads) t.join();
  return errors;
}

void Nodes::connect_all() {
  Set s(targets_.size());
  std::vector<std::size_t> all(targets_.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  auto errors = open_many(s, all, milliseconds{-1});  // each node's own connect timeout
  std::size_t up = 0;
  std::string last_error;
  for (std::size_t i = 0; i < targets_.size(); ++i) {
    if (s[i]) {
      ++up;
      continue;
    }
    // Credentials refused are the same on every node: say so at once.
    if (errors[i].find("refused the credentials") != std::string::npos) throw UnavailableError(errors[i]);
    last_error = errors[i];
    failed(i);
  }
  if (up < majority())
    throw UnavailableError("redlock: only " + std::to_string(up) + " of " + std::to_string(targets_.size()) +
                           " nodes reachable, a majority is " + std::to_string(majority()) + " (" + last_error + ")");
  give_back(std::move(s));
}

Nodes::Set Nodes::borrow() {
  std::lock_guard lk(mutex_);
  if (idle_.empty()) return Set(targets_.size());
  auto s = std::move(idle_.back());
  idle_.pop_back();
  return s;
}

void Nodes::give_back(Set s) {
  std::lock_guard lk(mutex_);
  if (idle_.size() < pool_size_) idle_.push_back(std::move(s));
}

void Nodes::failed(std::size_t i) { retry_at_[i] = (Clock::now() + retry_down_node_every).time_since_epoch().count(); }

void Nodes::ensure(Set& s, const std::vector<bool>& which, milliseconds connect_timeout, bool resting_too) {
  // An idle connection has nothing to read: readable (EOF, an error) means the server closed
  // it meanwhile (a restart). One poll() for all the nodes, not Connection::still_connected()'s
  // one per node: a syscall per node and round was a tenth of a Redlock cycle's CPU.
  // One still owed an answer is readable for that answer, so for it only the server's
  // close (POLLRDHUP: its FIN arrived) or a reset counts.
  std::vector<pollfd> fds;
  std::vector<std::size_t> node_of;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!which.empty() && !which[i]) continue;
    if (s[i] && !s[i]->usable()) s[i].reset();
    if (!s[i]) continue;
    short events = s[i]->unread.empty() ? POLLIN | POLLRDHUP : POLLRDHUP;
    fds.push_back(pollfd{s[i]->context()->fd, events, 0});
    node_of.push_back(i);
  }
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0)
    for (std::size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents && !(fds[k].revents == POLLIN && s[node_of[k]]->only_tls_records())) s[node_of[k]].reset();
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((!which.empty() && !which[i]) || s[i]) continue;
    if (!resting_too && Clock::now().time_since_epoch().count() < retry_at_[i]) continue;  // known down: not yet
    missing.push_back(i);
  }
  if (missing.empty()) return;
  open_many(s, missing, connect_timeout);
  for (auto i : missing)
    if (!s[i]) failed(i);
}

std::vector<NodeAnswer> Nodes::eval_all(const Script& script, const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args, milliseconds timeout,
                                        const std::vector<bool>& which, const Decided& decided) {
  const auto n = targets_.size();
  const auto deadline = Clock::now() + timeout;
  std::vector<NodeAnswer> out(n);
  Set s = borrow();
  auto lose = [&](std::size_t i, NodeAnswer::Kind kind) {
    out[i].kind = kind;
    s[i].reset();  // a late answer would be read as the next command's: drop the connection
    // A node that timed out rests too: one that hangs (stopped, swapping, a partition that
    // drops packets) still accepts connections, and would cost every call the timeout.
    failed(i);
  };
  auto kind_of = [](const Error& e) {
    return e.kind() == ErrorKind::timeout ? NodeAnswer::Kind::timed_out : NodeAnswer::Kind::down;
  };
  // Send everywhere first (hiredis only buffers an appended command; flush it), then read.
  // The command is formatted once for all nodes (five formattings were ~4% of the
  // client's CPU per cycle); the text, for a node that lost the script, only when needed.
  const std::string by_sha_command = format_eval(script, true, keys, args);
  std::string by_text_command;
  auto send = [&](std::size_t i, bool by_sha) {
    try {
      if (!by_sha && by_text_command.empty()) by_text_command = format_eval(script, false, keys, args);
      s[i]->append_formatted(by_sha ? by_sha_command : by_text_command);
      s[i]->flush();
      return true;
    } catch (const Error& e) {
      lose(i, kind_of(e));
      return false;
    }
  };
  std::vector<bool> sent(n, false);
  // A resting node (it failed or timed out within the last second) is skipped even where
  // this set still has a connection to it, as long as the others can make a majority; when
  // they cannot, it is asked anyway: a node that was only slow once must not cost the lock.
  const auto now = Clock::now().time_since_epoch().count();
  std::size_t awake = 0;
  for (std::size_t i = 0; i < n; ++i) awake += now >= retry_at_[i];
  const bool ask_resting = awake < majority();
  ensure(s, which, timeout, ask_resting);
  for (std::size_t i = 0; i < n; ++i) {
    if (!which.empty() && !which[i]) continue;
    if (s[i] && (ask_resting || now >= retry_at_[i]))
      sent[i] = send(i, true);
    else
      out[i].kind = NodeAnswer::Kind::down;
  }
  // Read the answers in the order they arrive, with one poll() over the nodes still owed
  // one: no per-node socket timeout to set (two setsockopt calls per node and call before)
  // and no waiting on a slow node while the others' answers sit unread.
  auto receive = [&](std::vector<bool> pending) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> node_of;
    for (;;) {
      fds.clear();
      node_of.clear();
      for (std::size_t i = 0; i < n; ++i) {
        if (!pending[i]) continue;
        try {
          auto r = s[i]->take_buffered();
          while (r && !s[i]->unread.empty()) {  // an earlier call's answer, left unread
            auto late = std::move(s[i]->unread.front());
            s[i]->unread.pop_front();
            if (late) late(*r);
            r = s[i]->take_buffered();
          }
          if (r) {
            out[i].reply = std::move(r);
            out[i].kind = NodeAnswer::Kind::answered;
            pending[i] = false;
            if (decided)
              if (auto late = decided(out)) {
                for (std::size_t j = 0; j < n; ++j)
                  if (pending[j]) {
                    out[j].kind = NodeAnswer::Kind::unread;
                    s[j]->unread.push_back(*late);
                  }
                return;
              }
            continue;
          }
        } catch (const Error& e) {
          lose(i, kind_of(e));
          pending[i] = false;
          continue;
        }
        fds.push_back(pollfd{s[i]->context()->fd, POLLIN, 0});
        node_of.push_back(i);
      }
      if (fds.empty()) return;
      const auto wait = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
      int ready = wait > 0 ? ::poll(fds.data(), fds.size(), static_cast<int>(wait)) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {  // the deadline passed (or poll failed): whoever has not answered is late
        for (auto i : node_of) lose(i, NodeAnswer::Kind::timed_out);
        return;
      }
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if (!fds[k].revents) continue;
        try {
          s[node_of[k]]->read_available();
        } catch (const Error& e) {
          lose(node_of[k], kind_of(e));
          pending[node_of[k]] = false;
        }
      }
    }
  };
  receive(sent);
  // A node that restarted or flushed its scripts: send the text (which caches it again).
  std::vector<bool> again(n, false);
  bool any_again = false;
  for (std::size_t i = 0; i < n; ++i)
    if (sent[i] && out[i].kind == NodeAnswer::Kind::answered && is_error(*out[i].reply, "NOSCRIPT")) {
      again[i] = send(i, false);
      any_again = any_again || again[i];
    }
  if (any_again) receive(again);
  give_back(std::move(s));
  return out;
}

}  // namespace dblock::detail::redis
