package envoyauthz

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"math/big"
	"runtime"
	"strings"
	"testing"
	"time"

	"filippo.io/bigmod"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
	"github.com/extauthz/extauthz/internal/testing/typical"
)

// signed is a token's signing input and decoded signature, split and
// decoded before the timed part: the floor of a miss is the signature
// check alone, and reading the token is the miss's own work.
type signed struct {
	input, sig []byte
	der        []byte // ES256: the signature in ASN.1, as the verifier hands it on
}

func splitSigned(tb testing.TB, alg, token string) signed {
	i := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil {
		tb.Fatal(err)
	}
	s := signed{input: []byte(token[:i]), sig: sig}
	if alg == "ES256" {
		r, ss := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		if s.der, err = asn1.Marshal(struct{ R, S *big.Int }{r, ss}); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// bareVerify is signature verification alone, the floor of a miss: the
// primitive the verifier runs, hashing included, with what the verifier
// prepares once per key prepared once (an HMAC keyed in advance, as the
// verifier's pooled hashers are; an RSA modulus in Montgomery form, as
// the verifier's keys are), on a token already split and decoded.
func bareVerify(tb testing.TB, alg string, rs, es testtoken.Key) func(signed) bool {
	switch alg {
	case "HS256":
		m := hmac.New(sha256.New, []byte(secret))
		var out [sha256.Size]byte
		return func(s signed) bool {
			m.Reset()
			m.Write(s.input)
			return hmac.Equal(m.Sum(out[:0]), s.sig)
		}
	case "RS256":
		pub := rs.Private.Public().(*rsa.PublicKey)
		n, err := bigmod.NewModulus(pub.N.Bytes())
		if err != nil {
			tb.Fatal(err)
		}
		return func(s signed) bool {
			h := sha256.Sum256(s.input)
			x, err := bigmod.NewNat().SetBytes(s.sig, n)
			if err != nil {
				return false
			}
			em := bigmod.NewNat().ExpShortVarTime(x, uint(pub.E), n).Bytes(n)
			return bytes.Equal(em[len(em)-len(h):], h[:])
		}
	case "ES256":
		pub := es.Private.Public().(*ecdsa.PublicKey)
		return func(s signed) bool {
			h := sha256.Sum256(s.input)
			return ecdsa.VerifyASN1(pub, h[:], s.der)
		}
	}
	tb.Fatalf("no bare verification for %s", alg)
	return nil
}

// BenchmarkMissOverhead measures a cache miss (a token seen for the first
// time, typical claims) through Server.Check and, in the same run, the bare
// signature verification of the same tokens (bareVerify). It reports the
// miss's time over the verification's (miss/verify) and what the miss
// costs beyond the signature (extra-ns/op). Each miss is followed by a
// cache hit of a request of the batch before, cached and its answer
// memoized, so that misses, hits and verifications share the machine's
// load and caches: hit-ns/op is what any check costs on this path with
// tokens that vary as a miss's do, and own-ns/op what only a miss does
// beyond the signature and that (reading the token, its claims, building
// the grant, its answer and cache entry). allocs/op counts the miss, the
// hit and the bare verification; miss-allocs/op is the miss's alone. That
// still holds what the signature check allocates on every call
// (sig-allocs/op, as the bare verification allocates it: RS256 its
// result, ES256 the public key's internal form, which the standard
// library rebuilds each time); own-allocs/op is the miss's own, without it.
func BenchmarkMissOverhead(b *testing.B) { benchmarkMiss(b, false) }

// BenchmarkMissOverheadWire is BenchmarkMissOverhead on the path the
// service runs: the request's bytes decoded by the wire codec (with the
// copy the codec makes), checked by checkWire and the answer encoded as
// the codec sends it.
func BenchmarkMissOverheadWire(b *testing.B) { benchmarkMiss(b, true) }

// missBatch is one batch of the miss benchmark: n tokens never seen, split
// for the bare verification, and their requests, as messages on the wire
// path.
type missBatch struct {
	toks []signed
	reqs []*authv3.CheckRequest
	msgs [][]byte
}

func benchmarkMiss(b *testing.B, wire bool) {
	issuers := typical.NewIssuers(b, secret)
	rs, es := issuers.RSA, issuers.EC
	pl := pipelinetest.New(b, issuers.Config(), check.Deps{}, check.Options{})
	srv := NewServer(pl)
	ctx := context.Background()
	seq := int(time.Now().UnixNano() % 1_000_000_000)
	if wire {
		seq += 1_000_000_000 // tokens the other benchmark did not cache
	}
	cdc := codec{proto: encoding.GetCodecV2("proto")}
	for _, alg := range []string{"HS256", "RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			verify := bareVerify(b, alg, rs, es)
			const n = 1000
			fresh := func() missBatch {
				m := missBatch{toks: make([]signed, n), reqs: make([]*authv3.CheckRequest, n)}
				for i := range m.reqs {
					seq++
					tok := issuers.Token(b, alg, seq)
					m.toks[i] = splitSigned(b, alg, tok)
					m.reqs[i] = typicalRequest(tok)
					if wire {
						msg, err := proto.Marshal(m.reqs[i])
						if err != nil {
							b.Fatal(err)
						}
						m.msgs = append(m.msgs, msg)
					}
				}
				return m
			}
			// check checks the j-th request of a batch, on the path the
			// benchmark measures, and fails it if denied.
			check := func(m *missBatch, j int) {
				if wire {
					if !checkWireOnce(b, srv, ctx, cdc, m.msgs[j]) {
						b.Fatal("denied")
					}
				} else if r, _ := srv.Check(ctx, m.reqs[j]); r.GetStatus().GetCode() != 0 {
					b.Fatalf("denied: %v", r)
				}
			}
			// cached makes a batch's verdicts cached and their answers
			// memoized (a grant's second use) for the next batch's hits.
			cached := func(m *missBatch, upTo int) {
				for j := range upTo {
					check(m, j)
				}
			}
			// The floor and the hits are measured on batches like the
			// misses', interleaved with them, so that all three see the
			// same load on the machine.
			hits := fresh()
			cached(&hits, n)
			cached(&hits, n)
			allocsSig := testing.AllocsPerRun(n/10, func() { verify(hits.toks[0]) })
			allocsHit := testing.AllocsPerRun(n/10, func() { check(&hits, 0) })
			batch := fresh()
			var verifyTime, hitTime time.Duration
			// mallocs counts the timed part's allocations, as allocs/op
			// does, so that the miss's own can be reported.
			var (
				ms      runtime.MemStats
				mallocs uint64
			)
			mark := func() uint64 { runtime.ReadMemStats(&ms); return ms.Mallocs }
			b.ReportAllocs()
			i := 0
			start := mark()
			for b.Loop() {
				if i == n {
					b.StopTimer()
					mallocs += mark() - start
					cached(&batch, n) // the misses' second use
					hits, batch = batch, fresh()
					i = 0
					start = mark()
					b.StartTimer()
				}
				t0 := time.Now()
				if !verify(batch.toks[i]) {
					b.Fatal("bare verification failed")
				}
				t1 := time.Now()
				check(&batch, i)
				t2 := time.Now()
				check(&hits, i)
				verifyTime += t1.Sub(t0)
				hitTime += time.Since(t2)
				i++
			}
			mallocs += mark() - start
			verifyNs := float64(verifyTime.Nanoseconds()) / float64(b.N)
			hitNs := float64(hitTime.Nanoseconds()) / float64(b.N)
			missNs := float64((b.Elapsed() - verifyTime - hitTime).Nanoseconds()) / float64(b.N)
			b.ReportMetric(missNs, "miss-ns/op")
			b.ReportMetric(verifyNs, "verify-ns/op")
			b.ReportMetric(missNs/verifyNs, "miss/verify")
			b.ReportMetric(missNs-verifyNs, "extra-ns/op")
			b.ReportMetric(hitNs, "hit-ns/op")
			b.ReportMetric(missNs-verifyNs-hitNs, "own-ns/op")
			// less the bare verification's and the hit's
			missAllocs := float64(mallocs)/float64(b.N) - allocsSig - allocsHit
			b.ReportMetric(missAllocs, "miss-allocs/op")
			b.ReportMetric(allocsSig, "sig-allocs/op")
			b.ReportMetric(missAllocs-allocsSig, "own-allocs/op")
		})
	}
}

// checkWireOnce runs one request through the wire path as handleWire does,
// with the codec's decoding copy and encoding, and reports whether it was
// allowed.
func checkWireOnce(b *testing.B, srv *Server, ctx context.Context, cdc codec, msg []byte) bool {
	w := wirePool.Get().(*wireRequest)
	if err := cdc.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, w); err != nil {
		b.Fatal(err)
	}
	out := srv.checkWire(ctx, w)
	w.release()
	ok := false
	switch out := out.(type) {
	case *authv3.CheckResponse:
		ok = out.GetStatus().GetCode() == 0
	case *encodedResponse:
		ok = true
	}
	enc, err := cdc.Marshal(out)
	if err != nil {
		b.Fatal(err)
	}
	enc.Free()
	return ok
}

// BenchmarkHitWireCold measures cache hits on the path the service runs
// (checkWireOnce), over 1,000 cached tokens in turn, each request its own
// bytes: what a hit costs when neither the request nor its cache entry is
// in the processor's caches, as in service, where the tight loop of
// BenchmarkCheck/hit flatters every piece that reads memory.
func BenchmarkHitWireCold(b *testing.B) {
	issuers := typical.NewIssuers(b, secret)
	srv := NewServer(pipelinetest.New(b, issuers.Config(), check.Deps{}, check.Options{}))
	cdc := codec{proto: encoding.GetCodecV2("proto")}
	ctx := context.Background()
	const n = 1000
	msgs := make([][]byte, n)
	for i := range msgs {
		m, err := proto.Marshal(typicalRequest(issuers.Token(b, "HS256", i)))
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = m
	}
	// The first pass caches the verdicts, the second memoizes the answers.
	for range 2 {
		for _, m := range msgs {
			checkWireOnce(b, srv, ctx, cdc, m)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if !checkWireOnce(b, srv, ctx, cdc, msgs[i]) {
			b.Fatal("denied")
		}
		if i++; i == n {
			i = 0
		}
	}
}
