// The `transport` line of `dblock doctor` (Client::check_settings): whether the traffic to the
// server is encrypted and the server verified, judged by where the server is.
#pragma once

#include "core/transport.hpp"
#include "core/url.hpp"
#include "dblock/settings.hpp"

namespace dblock::detail {

// Whether every server the URL names is on this machine (a loopback address, localhost, a
// Unix socket): then nothing crosses a network.
bool on_this_machine(const Url& url);

// The line: ok when the server is on this machine or its certificate's chain was verified;
// `exposed` for plaintext, or TLS to a server nobody checked, off this machine.
SettingCheck transport_check(const Url& url, const Transport& t);

}  // namespace dblock::detail
