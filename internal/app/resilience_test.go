package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/extauthz/extauthz/internal/testing/testjwks"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const idpIssuer = "https://idp.example.com"

// jwksConfig is one JWKS issuer and a default route; extra is appended
// (limits, another refresh interval).
func jwksConfig(url, issuerExtra, extra string) string {
	return fmt.Sprintf("issuers: [{name: idp, issuer: %s, algorithms: [ES256, RS256], jwks_url: %s%s}]\nroutes: [{name: all, default: true, issuers: [idp]}]\n%s", idpIssuer, url, issuerExtra, extra)
}

func idpToken(t testing.TB, k testtoken.Key, jti string) string {
	return k.Sign(t, jwt.MapClaims{"sub": "alice", "iss": idpIssuer, "jti": jti, "exp": time.Now().Add(time.Hour).Unix()})
}

func waitReadyz(t *testing.T, s *server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := httpGet(t, "http://"+s.opsAddr+"/readyz"); code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dial(t *testing.T, addr string) authv3.AuthorizationClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return authv3.NewAuthorizationClient(conn)
}

func statusWith(ctx context.Context, c authv3.AuthorizationClient, token string) (int, error) {
	resp, err := c.Check(ctx, envoyRequest(map[string]string{"authorization": "Bearer " + token}))
	if err != nil {
		return 0, err
	}
	if resp.GetStatus().GetCode() == 0 {
		return 200, nil
	}
	return int(resp.GetDeniedResponse().GetStatus().GetCode()), nil
}

// TestUnknownKIDFlood: 1,200 concurrent checks of tokens naming unknown
// kids, against a JWKS that accepts connections and never answers, while
// a client keeps checking a cached token. The flood's checks wait at most
// the check deadline, and only limits.max_waiting_per_dependency of them
// at once; the rest are answered 401 at once, so the cached-token checks
// (which need nothing) lose under 1%.
func TestUnknownKIDFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	good, rogue := testtoken.EC(t, "k1"), testtoken.EC(t, "rotated-or-forged")
	jw := testjwks.New(t, good)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, jwksConfig(jw.URL, "", "limits: {check_deadline: 1s, max_concurrent_checks: 1024}\n"))
	s := startServerWith(t, nil, ServeOptions{ConfigFile: cfg})
	waitReadyz(t, s)
	cached := idpToken(t, good, "cached")
	if code, err := s.statusOf(t, cached); code != 200 {
		t.Fatalf("cached token before the flood: %d %v", code, err)
	}

	const flood, rounds = 1200, 3
	tokens := make([][]string, flood)
	for i := range tokens {
		for r := range rounds {
			tokens[i] = append(tokens[i], idpToken(t, rogue, fmt.Sprintf("flood-%d-%d", i, r)))
		}
	}
	jw.Hang(true)
	defer jw.Hang(false)

	floodClient := dial(t, s.grpcAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		wg                  sync.WaitGroup
		floodDone           atomic.Bool
		floodByCode         sync.Map // status -> *atomic.Int64
		good200, goodFailed atomic.Int64
	)
	count := func(code int) {
		v, _ := floodByCode.LoadOrStore(code, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, tok := range tokens[i] {
				code, err := statusWith(ctx, floodClient, tok)
				if err != nil {
					code = -1
				}
				count(code)
			}
		}()
	}
	cachedClient := dial(t, s.grpcAddr)
	var gwg sync.WaitGroup
	for range 8 {
		gwg.Add(1)
		go func() {
			defer gwg.Done()
			for n := 0; n < 100_000 && !floodDone.Load() && ctx.Err() == nil; n++ {
				if code, err := statusWith(ctx, cachedClient, cached); err == nil && code == 200 {
					good200.Add(1)
				} else {
					goodFailed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	floodDone.Store(true)
	gwg.Wait()
	if ctx.Err() != nil {
		t.Fatal("the flood did not finish in 30 s")
	}
	codes := map[int]int64{}
	floodByCode.Range(func(k, v any) bool { codes[k.(int)] = v.(*atomic.Int64).Load(); return true })
	total := good200.Load() + goodFailed.Load()
	t.Logf("flood answers by status: %v; cached-token checks: %d, failed %d (%.2f%%)", codes, total, goodFailed.Load(), 100*float64(goodFailed.Load())/float64(max(total, 1)))
	if total < 100 {
		t.Fatalf("only %d cached-token checks ran during the flood", total)
	}
	if goodFailed.Load()*100 >= total {
		t.Fatalf("%d of %d cached-token checks failed during the flood (>= 1%%)", goodFailed.Load(), total)
	}
	if codes[401] < flood*rounds*99/100 {
		t.Fatalf("flood answers %v: want 401 for (nearly) all %d", codes, flood*rounds)
	}
}

// TestReloadDuringJWKSOutage: reloads while the JWKS answers 500, of a file
// that keeps the key source and of one that changes it (same issuer): new
// tokens keep getting 200 and readiness never drops.
func TestReloadDuringJWKSOutage(t *testing.T) {
	k := testtoken.EC(t, "k1")
	jw := testjwks.New(t, k)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, jwksConfig(jw.URL, "", ""))
	s := startServerWith(t, nil, ServeOptions{ConfigFile: cfg})
	waitReadyz(t, s)
	jw.Fail(500)
	other := testjwks.New(t) // the changed source's endpoint, down too
	other.Fail(503)
	files := []struct{ name, content string }{
		{"route changed, same key source", jwksConfig(jw.URL, "", "cache: {negative_ttl: 3s}\n")},
		{"refresh interval changed", jwksConfig(jw.URL, ", refresh_interval: 1m", "")},
		{"JWKS URL changed", jwksConfig(other.URL, "", "")},
	}
	for i, f := range files {
		writeFile(t, cfg, f.content)
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitGeneration(t, s, float64(i+2))
		if code, body := httpGet(t, "http://"+s.opsAddr+"/readyz"); code != 200 {
			t.Fatalf("%s: /readyz %d %s after a reload during the outage", f.name, code, body)
		}
		if code, err := s.statusOf(t, idpToken(t, k, "new-"+strconv.Itoa(i))); code != 200 {
			t.Fatalf("%s: new token got %d %v after a reload during the outage", f.name, code, err)
		}
	}
}

var generationMetric = regexp.MustCompile(`(?m)^extauthz_config_generation (\d+)$`)

func waitGeneration(t *testing.T, s *server, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := httpGet(t, "http://"+s.opsAddr+"/metrics")
		if m := generationMetric.FindStringSubmatch(body); m != nil {
			if v, _ := strconv.ParseFloat(m[1], 64); v >= want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("configuration generation never reached %v", want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestReadinessThroughReloads: 50 reloads (SIGHUP) while /readyz and the
// gRPC health service are polled: never "not ready", and the reloads cost
// no JWKS fetch (the key source is kept).
func TestReadinessThroughReloads(t *testing.T) {
	k := testtoken.EC(t, "k1")
	jw := testjwks.New(t, k)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, jwksConfig(jw.URL, "", ""))
	s := startServerWith(t, nil, ServeOptions{ConfigFile: cfg})
	waitReadyz(t, s)
	fetches := jw.Fetches()

	health := healthpb.NewHealthClient(s.conn)
	// gRPC health follows readiness on a 250 ms tick: wait for the first.
	for deadline := time.Now().Add(5 * time.Second); ; {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gRPC health never SERVING: %v %v", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var (
		stop             atomic.Bool
		wg               sync.WaitGroup
		polls, notReady  atomic.Int64
		healthNotServing atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; n < 1_000_000 && !stop.Load(); n++ {
			code, _ := httpGet(t, "http://"+s.opsAddr+"/readyz")
			if code != 200 {
				notReady.Add(1)
			}
			resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				healthNotServing.Add(1)
			}
			polls.Add(1)
		}
	}()
	for i := range 50 {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitGeneration(t, s, float64(i+2))
	}
	time.Sleep(300 * time.Millisecond) // past the 250 ms readiness tick
	stop.Store(true)
	wg.Wait()
	t.Logf("%d readiness polls during 50 reloads; JWKS fetches during them: %d", polls.Load(), jw.Fetches()-fetches)
	if notReady.Load() != 0 || healthNotServing.Load() != 0 {
		t.Fatalf("not ready %d times (/readyz) and %d times (gRPC health) in %d polls during 50 reloads", notReady.Load(), healthNotServing.Load(), polls.Load())
	}
	if polls.Load() < 50 {
		t.Fatalf("only %d polls", polls.Load())
	}
	if n := jw.Fetches() - fetches; n > 2 {
		t.Fatalf("50 reloads caused %d JWKS fetches, want at most 2", n)
	}
}

// TestKeyRemovalEndsCachedVerdicts: the issuer drops a key from its JWKS;
// the next refresh drops the cached verdicts of tokens signed with it
// (counted) and those tokens are refused from then on.
func TestKeyRemovalEndsCachedVerdicts(t *testing.T) {
	kept, compromised := testtoken.EC(t, "k1"), testtoken.EC(t, "k2")
	jw := testjwks.New(t, kept, compromised)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, jwksConfig(jw.URL, ", refresh_interval: 50ms", ""))
	s := startServerWith(t, nil, ServeOptions{ConfigFile: cfg})
	waitReadyz(t, s)
	tok := idpToken(t, compromised, "stolen")
	for range 2 {
		if code, err := s.statusOf(t, tok); code != 200 {
			t.Fatalf("before the rotation: %d %v", code, err)
		}
	}
	jw.SetKeys(kept)
	const series = `extauthz_verdicts_dropped_total{reason="key_removed"}`
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, s.opsAddr, series) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached 1", series)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, err := s.statusOf(t, tok); code != 401 {
		t.Fatalf("token of the removed key after the refresh: %d %v, want 401", code, err)
	}
}
