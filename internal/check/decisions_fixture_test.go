package check_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/fixtures"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
)

// The decision tables of the protocols: what the pipeline decides for a
// request, whatever front end carried it. They go through the public API
// (Pipeline.Check with a check.Request) only; the front ends' tests cover
// how a verdict is encoded.

// The shared protocol fixture: ProtocolConfig and its tokens.
const protocolConfig = pipelinetest.ProtocolConfig

func token(t testing.TB, sub string, extra jwt.MapClaims) string {
	return pipelinetest.ProtocolToken(t, sub, extra)
}

// decider runs requests through one pipeline.
type decider struct{ pl *check.Pipeline }

func newDecider(t testing.TB) *decider {
	t.Helper()
	return newDeciderOf(t, protocolConfig)
}

// newDeciderOf runs requests through a pipeline of config.
func newDeciderOf(t testing.TB, config string) *decider {
	t.Helper()
	return &decider{pl: pipelinetest.New(t, config, check.Deps{}, check.Options{})}
}

// result is a verdict as a proxy would act on it.
type result struct {
	status   int
	header   http.Header // client response headers (not allowed)
	body     []byte
	upstream http.Header // upstream request headers (allowed); nil otherwise
	call     check.Call
	verdict  check.Verdict
}

// send decides r with body (nil: not sent); partial marks a body cut short.
func (d *decider) send(t testing.TB, r *http.Request, body []byte, partial bool) result {
	t.Helper()
	v := d.pl.Check(t.Context(), pipelinetest.Request(r, body, partial))
	res := result{status: v.Status(), call: v.Call, verdict: v}
	if v.Outcome == check.Allowed {
		up := r.Header.Clone()
		for _, name := range v.Remove {
			up.Del(name)
		}
		for _, h := range v.Set {
			up.Set(h.Name, h.Value)
		}
		res.status, res.upstream = 200, up
		return res
	}
	res.header = http.Header{}
	for _, h := range v.ResponseHeaders {
		res.header.Add(h.Name, h.Value)
	}
	res.body = v.Body
	return res
}

func recording(t testing.TB, name string) fixtures.Recording {
	t.Helper()
	rec, err := fixtures.Named(name)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// replay decides a recording with a real token in place of the placeholder.
func (d *decider) replay(t testing.TB, rec fixtures.Recording, host, tok string, edit func(*http.Request)) result {
	t.Helper()
	r := rec.HTTPRequest(host)
	if tok == "" {
		r.Header.Del("Authorization")
	} else {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	if edit != nil {
		edit(r)
	}
	var body []byte
	if len(rec.Body) > 0 {
		body = rec.Body
	}
	return d.send(t, r, body, false)
}

type rpcError struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
			Scope  string `json:"scope"`
		} `json:"data"`
	} `json:"error"`
}

func decodeRPC(t testing.TB, body []byte) rpcError {
	t.Helper()
	var e rpcError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("body is not JSON-RPC: %q", body)
	}
	return e
}

// exchanger is a pipeline whose routes exchange the inbound token at a
// test STS.
type exchanger struct {
	decider
	sts *ststest.Server
}

func newExchanger(t testing.TB) *exchanger {
	t.Helper()
	pl, sts := pipelinetest.Exchanging(t)
	return &exchanger{decider: decider{pl: pl}, sts: sts}
}

// mcp decides a JSON-RPC call (id 42) to the files route.
func (x *exchanger) mcp(t testing.TB, tok, method, params string, headers map[string]string) result {
	t.Helper()
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"` + method + `","params":` + params + `}`)
	r, _ := http.NewRequest("POST", "http://mcp.example.com/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return x.send(t, r, body, false)
}
