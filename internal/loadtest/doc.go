// Package loadtest measures the service's throughput and latency against a
// do-nothing ext_authz server under the same load, in the same run.
//
// It owns the pieces of that measurement:
//
//   - NoopServer, the baseline: an envoy.service.auth.v3.Authorization server
//     that allows everything without looking;
//   - Run, the load generator: N callers over M gRPC connections sending
//     CheckRequests shaped like Envoy's, for a warm-up and then a measured,
//     bounded time, recording throughput and latency percentiles in a
//     Histogram and counting every answer that is not OK as an error;
//   - TokenSource and its three forms (Fixed, Pool, Sequence), which hand out
//     bearer tokens signed before the clock starts;
//   - the benchmark's keys, JWKS and service configuration (WriteSetup) and
//     its tokens (Minter);
//   - Scenario, Runner and Report: each scenario measured on the do-nothing
//     server and then on the service, compared with its Target, and printed.
//
// Speed is judged only here, by ratio to the baseline on the same machine,
// never by timed unit tests.
package loadtest
