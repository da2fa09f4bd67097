package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
)

// Defaults for Options.
const (
	// DefaultMaxCost bounds the cost CEL estimates for an expression at
	// load, in CEL's cost units (about one per value visited).
	DefaultMaxCost = 100_000
	// DefaultCostLimit stops an evaluation that has spent this much.
	DefaultCostLimit = 1_000_000
	// MaxExpressionLength bounds an expression's text.
	MaxExpressionLength = 16 << 10
	// assumedSize is the size the load-time estimate assumes for a list,
	// map or string read from the request or the token (arguments, claims,
	// headers): enough for real inputs, finite so that an expression that
	// loops over loops is refused at load. Larger inputs are stopped by the
	// runtime limit.
	assumedSize = 256
	// maxInputSize bounds every input for real: the body, the token and
	// each header are at most 1 MiB before the service reads them.
	maxInputSize = 1 << 20
)

// Variable names, as expressions write them.
const (
	VarJWT      = "jwt"
	VarIdentity = "identity"
	VarRequest  = "request"
	VarMCP      = "mcp"
	VarA2A      = "a2a"
	VarLineage  = "lineage"
	VarNow      = "now"
)

// variables lists every variable in a fixed order (Program.Reads).
var variables = []string{VarJWT, VarIdentity, VarRequest, VarMCP, VarA2A, VarLineage, VarNow}

// Options configure an Env; zero values mean the defaults.
type Options struct {
	MaxCost   uint64 // bound on the estimated cost at load
	CostLimit uint64 // bound on the actual cost of one evaluation
}

// Env compiles expressions. It is safe for concurrent use.
type Env struct {
	env       *cel.Env
	maxCost   uint64
	costLimit uint64
}

// NewEnv returns the environment every rule expression is compiled in.
func NewEnv(o Options) (*Env, error) {
	if o.MaxCost == 0 {
		o.MaxCost = DefaultMaxCost
	}
	if o.CostLimit == 0 {
		o.CostLimit = DefaultCostLimit
	}
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, err
	}
	p := provider{reg}
	env, err := cel.NewEnv(
		cel.CustomTypeProvider(p),
		cel.CustomTypeAdapter(p),
		cel.Variable(VarJWT, dynMap),
		cel.Variable(VarIdentity, types.NewObjectType(typeIdentity)),
		cel.Variable(VarRequest, types.NewObjectType(typeRequest)),
		cel.Variable(VarMCP, types.NewObjectType(typeMCP)),
		cel.Variable(VarA2A, types.NewObjectType(typeA2A)),
		cel.Variable(VarLineage, types.NewObjectType(typeLineage)),
		cel.Variable(VarNow, types.TimestampType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
		ext.Strings(),
		cel.Function("cleanPath",
			cel.Overload("cleanPath_string", []*types.Type{types.StringType}, types.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					s, ok := v.(types.String)
					if !ok {
						return types.MaybeNoSuchOverloadErr(v)
					}
					return types.String(cleanPath(string(s)))
				}))),
	)
	if err != nil {
		return nil, err
	}
	return &Env{env: env, maxCost: o.MaxCost, costLimit: o.CostLimit}, nil
}

// cleanPath is path.Clean with backslashes read as slashes, so that
// "..\\" climbs too (servers on Windows take both). The empty path stays
// empty: it names no file.
func cleanPath(s string) string {
	if s == "" {
		return ""
	}
	return path.Clean(strings.ReplaceAll(s, `\`, "/"))
}

// CompileError is an expression that cannot be used, with CEL's messages.
type CompileError struct {
	Issues []Issue
}

// Issue is one problem CEL found, at a line and column of the expression
// (1-based; 0 when CEL names no place).
type Issue struct {
	Line, Column int
	Message      string
}

func (e *CompileError) Error() string {
	var b strings.Builder
	for i, is := range e.Issues {
		if i > 0 {
			b.WriteString("; ")
		}
		if is.Line > 0 {
			fmt.Fprintf(&b, "line %d, column %d: ", is.Line, is.Column)
		}
		b.WriteString(is.Message)
	}
	return b.String()
}

func compileError(msg string) *CompileError {
	return &CompileError{Issues: []Issue{{Message: msg}}}
}

// Program is a compiled expression. It is immutable and safe for
// concurrent use.
type Program struct {
	source  string
	prg     cel.Program
	partial cel.Program // for CanCall: mcp.arguments unknown

	reads          []string // top-level variables read, in variables order
	claims         []string // jwt claims read by name, sorted
	allClaims      bool     // jwt is read in a way that names no claim
	readsArguments bool
	headers        []string // request headers read by name, lower-cased, sorted
	cost           cost.Estimate
	tracked        bool // the runtime cost limit is tracked (see Compile)
	paths          []string
	readers        []reader // for Values
}

type reader struct {
	path string
	prg  cel.Program
}

// Compile parses, type-checks and cost-checks expr. It must yield a bool.
// Errors are *CompileError.
func (e *Env) Compile(expr string) (*Program, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, compileError("empty expression")
	}
	if len(expr) > MaxExpressionLength {
		return nil, compileError(fmt.Sprintf("expression longer than %d bytes", MaxExpressionLength))
	}
	ast, iss := e.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		ce := &CompileError{}
		for _, er := range iss.Errors() {
			ce.Issues = append(ce.Issues, Issue{Line: er.Location.Line(), Column: er.Location.Column() + 1, Message: er.Message})
		}
		return nil, ce
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, compileError(fmt.Sprintf("expression yields %s, want bool", t))
	}
	est, err := e.env.EstimateCost(ast, estimator{size: assumedSize})
	if err != nil {
		return nil, compileError("cost estimate: " + err.Error())
	}
	if est.Max > e.maxCost {
		return nil, compileError(fmt.Sprintf("expression may cost up to %d, more than the bound %d: it iterates over too much", est.Max, e.maxCost))
	}
	p := &Program{source: expr, cost: est}
	p.analyse(ast.NativeRep())
	for _, path := range p.paths {
		a, iss := e.env.Compile(path)
		if iss != nil && iss.Err() != nil {
			continue
		}
		if prg, err := e.env.Program(a, cel.CostLimit(e.costLimit)); err == nil {
			p.readers = append(p.readers, reader{path: path, prg: prg})
		}
	}
	// The runtime limit is enforced by a cost tracker, which costs a few
	// allocations per evaluation. When even the largest inputs cannot take
	// the expression past the limit (no comprehension over them, say), the
	// tracker could never fire and is left out.
	worst, err := e.env.EstimateCost(ast, estimator{size: maxInputSize})
	var limit []cel.ProgramOption
	if err != nil || worst.Max > e.costLimit {
		limit = append(limit, cel.CostLimit(e.costLimit))
		p.tracked = true
	}
	if p.prg, err = e.env.Program(ast, append(limit, cel.EvalOptions(cel.OptOptimize))...); err != nil {
		return nil, compileError(err.Error())
	}
	if p.partial, err = e.env.Program(ast, append(limit, cel.EvalOptions(cel.OptPartialEval))...); err != nil {
		return nil, compileError(err.Error())
	}
	return p, nil
}

// analyse records what the expression reads: which variables, which jwt
// claims, whether mcp.arguments. Any reading it cannot pin down counts as
// reading everything (every claim, the arguments): over-reporting only
// keeps more claims or evaluates per request.
func (p *Program) analyse(a *celast.AST) {
	read := map[string]bool{}
	claims, headers := map[string]bool{}, map[string]bool{}
	root := celast.NavigateAST(a)
	for _, n := range celast.MatchDescendants(root, celast.KindMatcher(celast.IdentKind)) {
		name := n.AsIdent()
		if !slices.Contains(variables, name) {
			continue
		}
		read[name] = true
		p.addPath(n)
		parent, ok := n.Parent()
		switch name {
		case VarJWT:
			if c, ok := claimName(n, parent, ok); ok {
				claims[c] = true
			} else {
				p.allClaims = true
			}
		case VarMCP:
			if !ok || parent.Kind() != celast.SelectKind || parent.AsSelect().FieldName() == "arguments" {
				p.readsArguments = true
			}
		case VarRequest:
			if ok && parent.Kind() == celast.SelectKind && parent.AsSelect().FieldName() == "headers" {
				gp, hasGP := parent.Parent()
				if h, named := claimName(parent, gp, hasGP); named {
					headers[strings.ToLower(h)] = true
				}
			}
		}
	}
	for _, v := range variables {
		if read[v] {
			p.reads = append(p.reads, v)
		}
	}
	for c := range claims {
		p.claims = append(p.claims, c)
	}
	slices.Sort(p.claims)
	for h := range headers {
		p.headers = append(p.headers, h)
	}
	slices.Sort(p.headers)
}

// addPath records the field path a variable is read through
// (mcp.arguments.path), for Values.
func (p *Program) addPath(n celast.NavigableExpr) {
	path := n.AsIdent()
	for range 16 {
		parent, ok := n.Parent()
		if !ok || parent.Kind() != celast.SelectKind || parent.AsSelect().IsTestOnly() {
			break
		}
		path += "." + parent.AsSelect().FieldName()
		n = parent
	}
	if !slices.Contains(p.paths, path) {
		p.paths = append(p.paths, path)
	}
}

// Values evaluates every field path the expression reads (identity.subject,
// mcp.arguments.path, ...) on in and returns "path = value" lines, for
// explanations. Values may hold personal data: show them to operators only.
func (p *Program) Values(in *Input) []string {
	if p.readsArguments && in.MCP.BodyComplete && in.MCP.Arguments != "" {
		in.MCP.args.reset(in.MCP.Arguments)
	}
	out := make([]string, 0, len(p.readers))
	for _, r := range p.readers {
		if r.path == "request.headers" {
			// Header values carry credentials: name the headers only.
			out = append(out, r.path+" = "+headerNames(in.Request.Headers))
			continue
		}
		if name, ok := strings.CutPrefix(r.path, "request.headers."); ok && sensitiveHeader(name) {
			out = append(out, r.path+" = (redacted)")
			continue
		}
		v, _, err := r.prg.Eval(in)
		switch {
		case err != nil:
			out = append(out, r.path+": "+err.Error())
		default:
			out = append(out, r.path+" = "+show(v))
		}
	}
	return out
}

// headerNames lists a request's header names, sorted.
func headerNames(h map[string]string) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	return "(values not shown) " + strings.Join(names, ",")
}

// sensitiveHeader reports whether a header usually carries a credential
// (a DPoP proof is one: Explain checks it without spending it).
func sensitiveHeader(name string) bool {
	name = strings.ToLower(name)
	return name == "authorization" || name == "proxy-authorization" || name == "cookie" || name == "dpop" ||
		strings.Contains(name, "token") || strings.Contains(name, "key") || strings.Contains(name, "secret")
}

// show renders a CEL value as JSON where it can, bounded in length.
func show(v ref.Val) string {
	var s string
	if native, err := v.ConvertToNative(reflect.TypeFor[any]()); err == nil {
		if b, err := json.Marshal(native); err == nil {
			s = string(b)
		}
	}
	if s == "" {
		s = fmt.Sprint(v.Value())
	}
	const maxShown = 200
	if len(s) > maxShown {
		s = s[:maxShown] + "…"
	}
	return s
}

// claimName returns the claim a use of jwt names: jwt.c, has(jwt.c),
// jwt["c"] or "c" in jwt.
func claimName(n, parent celast.NavigableExpr, hasParent bool) (string, bool) {
	if !hasParent {
		return "", false
	}
	switch parent.Kind() {
	case celast.SelectKind:
		return parent.AsSelect().FieldName(), true
	case celast.CallKind:
		call := parent.AsCall()
		args := call.Args()
		if len(args) != 2 || call.IsMemberFunction() {
			return "", false
		}
		var key celast.Expr
		switch call.FunctionName() {
		case "_[_]":
			if args[0].ID() != n.ID() {
				return "", false
			}
			key = args[1]
		case "@in":
			if args[1].ID() != n.ID() {
				return "", false
			}
			key = args[0]
		default:
			return "", false
		}
		if key.Kind() != celast.LiteralKind {
			return "", false
		}
		if s, ok := key.AsLiteral().(types.String); ok {
			return string(s), true
		}
	}
	return "", false
}

// Source is the expression as written.
func (p *Program) Source() string { return p.source }

// Reads lists the top-level variables the expression reads.
func (p *Program) Reads() []string { return p.reads }

// Claims returns the jwt claims the expression reads by name; all is true
// when it reads jwt as a whole (iterates it, indexes it by a computed key):
// then a grant must keep every claim.
func (p *Program) Claims() (names []string, all bool) { return p.claims, p.allClaims }

// IdentityOnly reports whether the expression reads nothing but jwt and
// identity: its result is the same for every request of a grant and can
// be computed once and kept with the grant.
func (p *Program) IdentityOnly() bool {
	for _, v := range p.reads {
		if v != VarJWT && v != VarIdentity {
			return false
		}
	}
	return true
}

// Headers returns the request headers the expression reads by name
// (request.headers["x-tenant"], "x-tenant" in request.headers), lower-cased:
// a header sent more than once reaches the expression as its values joined
// with ",", which no comparison with one value matches, while the upstream
// may read either. A header read by a computed name is not listed.
func (p *Program) Headers() []string { return p.headers }

// ReadsArguments reports whether the expression reads mcp.arguments: it
// needs the whole body.
func (p *Program) ReadsArguments() bool { return p.readsArguments }

// Cost is CEL's estimate of the expression's cost, computed at load.
func (p *Program) Cost() (minimum, maximum uint64) { return p.cost.Min, p.cost.Max }

// ErrCostLimit is an evaluation stopped by the runtime cost limit.
var ErrCostLimit = errors.New("policy: expression exceeded its cost limit")

// Eval runs the expression on in. An error (the expression failed, ran
// over its cost limit, read arguments that are not available) means the
// rule cannot be decided: callers deny. in is not safe for concurrent use
// by two evaluations.
func (p *Program) Eval(in *Input) (bool, error) {
	if p.readsArguments {
		if !in.MCP.BodyComplete {
			return false, ErrNoArguments
		}
		// Index the top level up front: a body that is not an object
		// fails here rather than read as an empty map somewhere.
		if in.MCP.Arguments != "" {
			in.MCP.args.reset(in.MCP.Arguments)
			if !in.MCP.args.index() {
				return false, fmt.Errorf("policy: %w", errMalformed)
			}
		}
	}
	out, _, err := p.prg.Eval(in)
	if err != nil {
		return false, evalError(err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("policy: expression yielded %s, not a bool", out.Type().TypeName())
	}
	return bool(b), nil
}

func evalError(err error) error {
	if strings.Contains(err.Error(), "cost limit exceeded") || strings.Contains(err.Error(), "actual cost limit exceeded") {
		return fmt.Errorf("%w: %v", ErrCostLimit, err)
	}
	return fmt.Errorf("policy: %w", err)
}

// Decision is what CanCall finds.
type Decision int

// Decisions of CanCall.
const (
	Denied Decision = iota
	Allowed
	// DependsOnArguments: some arguments make the expression true and
	// others false (or CEL cannot tell which without them).
	DependsOnArguments
)

func (d Decision) String() string {
	switch d {
	case Allowed:
		return "allowed"
	case DependsOnArguments:
		return "depends-on-arguments"
	}
	return "denied"
}

// CanCall evaluates the expression for a call whose arguments are not
// known (a tool in a tools/list answer): Allowed or Denied when no
// argument could change the result, DependsOnArguments otherwise. in's
// arguments are ignored. unknown names further variables whose values are
// not known either (request, lineage, ...): what depends on them is
// reported as DependsOnArguments too, so that a tool is hidden only when
// nothing could make the call pass. An error is returned with Denied.
func (p *Program) CanCall(in *Input, unknown ...string) (Decision, error) {
	patterns := []*cel.AttributePatternType{cel.AttributePattern(VarMCP).QualString("arguments")}
	for _, v := range unknown {
		patterns = append(patterns, cel.AttributePattern(v))
	}
	vars, err := cel.PartialVars(in, patterns...)
	if err != nil {
		return Denied, err
	}
	out, _, err := p.partial.Eval(vars)
	if types.IsUnknown(out) {
		return DependsOnArguments, nil
	}
	if err != nil {
		return Denied, evalError(err)
	}
	switch out {
	case types.True:
		return Allowed, nil
	case types.False:
		return Denied, nil
	}
	return Denied, fmt.Errorf("policy: expression yielded %s, not a bool", out.Type().TypeName())
}

// estimator tells CEL's cost estimate how large the inputs may be: each
// list, map or string read from a variable at most size.
type estimator struct{ size uint64 }

func (e estimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if p := n.Path(); len(p) > 0 && slices.Contains(variables, p[0]) {
		return &cost.SizeEstimate{Min: 0, Max: e.size}
	}
	return nil
}

func (e estimator) EstimateCallCost(function, _ string, _ *cost.AstNode, _ []cost.AstNode) *cost.CallEstimate {
	if function == "cleanPath" {
		// Linear in its argument, like the string functions.
		return &cost.CallEstimate{CostEstimate: cost.Estimate{Min: 1, Max: 1 + e.size/10}}
	}
	return nil
}
