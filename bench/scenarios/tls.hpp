// dblock-bench scenario `tls`: what encryption costs a lock on warm, pooled connections.
// For each backend with a TLS test server (scripts/services' postgresql-tls, mysql-tls,
// redis-tls, etcd-tls: the plain service's settings, TLS only, the server verified and a
// client certificate presented), the default strategy's uncontended acquire+release and its
// hand-off, in plaintext to the plain server and over TLS to the TLS one. Ratio = TLS p50 /
// plaintext p50.
#pragma once

#include <vector>

#include "bench/support/run.hpp"

namespace dblock_bench {

// Rows: scenario "tls-uncontended" and "tls-handoff", own_table; per backend a plaintext row
// (strategy "<strategy>") and a TLS row ("<strategy> tls", compared with the plaintext row).
// A backend whose TLS server's URL is not set is left out, with a line on stderr.
BackendReport run_tls(const Options& opt);

// The tls rows as a Markdown table of their own on stdout, or nothing when there are none.
void print_tls_markdown(const std::vector<Row>& rows);

}  // namespace dblock_bench
