// Package opapdp runs Open Policy Agent as an OpenID AuthZEN 1.0 policy
// decision point for tests: an httptest server on 127.0.0.1 answering POST
// /access/v1/evaluation by evaluating a Rego policy with the AuthZEN request
// as input. It is the small adapter a deployment would put in front of OPA
// (OPA's own REST API speaks {"input": ...} / {"result": ...}, not AuthZEN),
// so tests can run real Rego decisions end to end.
//
// The policy is compiled once (rego.PrepareForEval); each request is one
// evaluation of the query. A query whose result is undefined is a denial,
// as OPA's own convention has it; a result that is not a single boolean, or
// an evaluation error, is a broken PDP and answers 500.
package opapdp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/rego"
)

// Path is the Access Evaluation endpoint's path (AuthZEN 1.0 section 6).
const Path = "/access/v1/evaluation"

// maxRequestBytes bounds an evaluation request; AuthZEN requests are small.
const maxRequestBytes = 1 << 20

// PDP is a running OPA-backed AuthZEN PDP.
type PDP struct {
	*httptest.Server
	query rego.PreparedEvalQuery

	mu     sync.Mutex
	inputs []string

	// Calls counts evaluation requests that reached the policy.
	Calls atomic.Int64
	// Status, if not 0 or 200, is answered instead of a decision.
	Status atomic.Int32
	// Body, if set, is answered verbatim (with 200) instead of a decision.
	Body atomic.Pointer[string]
}

// Start compiles module (Rego v1 syntax, file name policy.rego) with query,
// for example "data.authzen.allow", and serves it on 127.0.0.1. Close the
// PDP when done. A module that does not compile is an error.
func Start(ctx context.Context, module, query string) (*PDP, error) {
	pq, err := rego.New(
		rego.Query(query),
		rego.Module("policy.rego", module),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("opapdp: %w", err)
	}
	p := &PDP{query: pq}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p, nil
}

// Endpoint is the evaluation URL.
func (p *PDP) Endpoint() string { return p.URL + Path }

// Inputs returns the well-formed requests received so far, as sent: what
// the policy was given as input.
func (p *PDP) Inputs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.inputs...)
}

// required are the members each entity must have as strings (AuthZEN 1.0
// section 5). Names are matched exactly, as the policy reads them:
// "Subject" is not "subject".
var required = map[string][]string{
	"subject":  {"type", "id"},
	"action":   {"name"},
	"resource": {"type", "id"},
}

func (p *PDP) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	raw, input, err := readInput(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		http.Error(w, "malformed evaluation request", http.StatusBadRequest)
		return
	}
	p.Calls.Add(1)
	p.mu.Lock()
	p.inputs = append(p.inputs, string(raw))
	p.mu.Unlock()
	if id := r.Header.Get("X-Request-ID"); id != "" {
		w.Header().Set("X-Request-ID", id)
	}
	if s := p.Status.Load(); s != 0 && s != http.StatusOK {
		w.WriteHeader(int(s))
		return
	}
	if b := p.Body.Load(); b != nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, *b)
		return
	}
	decision, err := p.decide(r.Context(), input)
	if err != nil {
		http.Error(w, "policy evaluation failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Decision bool `json:"decision"`
	}{decision})
}

// readInput decodes one JSON object with the AuthZEN request's shape and
// nothing after it. Numbers stay json.Number so the policy sees them
// exactly as sent.
func readInput(body io.Reader) ([]byte, map[string]any, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, nil, err
	}
	var input map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&input); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("data after the request")
	}
	for entity, members := range required {
		e, ok := input[entity].(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("%s is not an object", entity)
		}
		for _, m := range members {
			if _, ok := e[m].(string); !ok {
				return nil, nil, fmt.Errorf("%s.%s is not a string", entity, m)
			}
		}
	}
	if c, ok := input["context"]; ok {
		if _, ok := c.(map[string]any); !ok {
			return nil, nil, errors.New("context is not an object")
		}
	}
	return raw, input, nil
}

// decide evaluates the prepared query: undefined is false, a single
// boolean is the decision, anything else is an error.
func (p *PDP) decide(ctx context.Context, input map[string]any) (bool, error) {
	rs, err := p.query.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return false, err
	}
	if len(rs) == 0 {
		return false, nil
	}
	d, ok := rego.ResultValue[bool](rs)
	if !ok {
		return false, errors.New("the query's result is not a single boolean")
	}
	return d, nil
}
