package adminapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

func printDropped(w io.Writer, kind, id, done string, d *adminv1.Dropped) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s %s %s; dropped:\n", kind, printable(id), done)
	fmt.Fprintf(tw, "  verdicts\t%d\n", d.GetVerdicts())
	fmt.Fprintf(tw, "  exchanged tokens\t%d\n", d.GetExchangedTokens())
	fmt.Fprintf(tw, "  session bindings\t%d\n", d.GetSessionBindings())
	fmt.Fprintf(tw, "  elicitations\t%d\n", d.GetElicitations())
	return tw.Flush()
}

// printKeyRevocation writes what revoking an API key did.
func printKeyRevocation(w io.Writer, issuer, id string, r *adminv1.RevokeAPIKeyResponse) error {
	until := "(unknown)"
	if r.GetUntil() != nil {
		until = r.GetUntil().AsTime().UTC().Format(time.RFC3339)
	}
	if err := printDropped(w, "API key", issuer+" "+id, "revoked until "+until, r.GetDropped()); err != nil {
		return err
	}
	if !r.GetKnown() {
		_, err := fmt.Fprintf(w, "note: the replica that answered has no key %s loaded (ids are case-sensitive); it is revoked all the same\n", printable(id))
		return err
	}
	return nil
}

// PrintExplanation writes how a request is decided: a table of the decision
// and its steps, then the CheckResponse; or, asJSON, the whole
// ExplainResponse as protojson. `extauthz check` and `extauthz admin
// explain` both print with it.
func PrintExplanation(w io.Writer, e *adminv1.ExplainResponse, asJSON bool) error {
	if asJSON {
		return writeJSON(w, e)
	}
	decision := "denied"
	if e.GetAllowed() {
		decision = "allowed"
	}
	route := e.GetRoute()
	if route == "" {
		route = "(none)"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "route\t%s\n", printable(route))
	fmt.Fprintf(tw, "decision\t%s: %d %s\n", decision, e.GetHttpStatus(), printable(e.GetOutcome()))
	if d := e.GetDescription(); d != "" {
		fmt.Fprintf(tw, "description\t%s\n", printable(d))
	}
	if len(e.GetSteps()) > 0 {
		fmt.Fprintf(tw, "\nSTEP\tOUTCOME\tDETAIL\n")
		for _, s := range e.GetSteps() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(s.GetName()), printable(s.GetOutcome()), printable(s.GetDetail()))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if e.GetCheckResponse() == nil {
		_, err := fmt.Fprintln(w, "\nresponse: (none)")
		return err
	}
	resp, err := e.GetCheckResponse().UnmarshalNew()
	if err != nil {
		return fmt.Errorf("check_response: %w", err)
	}
	fmt.Fprintf(w, "\nresponse (%s):\n", resp.ProtoReflect().Descriptor().FullName())
	return writeJSON(w, resp)
}

func printStats(w io.Writer, s *adminv1.StatsResponse) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%s\n", printable(s.GetVersion()))
	if s.GetStartedAt() != nil {
		fmt.Fprintf(tw, "started\t%s\n", formatTime(s.GetStartedAt()))
		fmt.Fprintf(tw, "uptime\t%s\n", s.GetUptime().AsDuration().Round(time.Second))
	}
	if cfg := s.GetConfig(); cfg != nil {
		loaded := "never"
		if cfg.GetLoadedAt() != nil {
			loaded = formatTime(cfg.GetLoadedAt())
		}
		fmt.Fprintf(tw, "config\tgeneration %d, loaded %s\n", cfg.GetGeneration(), loaded)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.GetCaches()) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nCACHE\tHITS\tMISSES\tEVICTIONS\tSIZE\n")
	for _, c := range s.GetCaches() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", printable(c.GetName()), c.GetHits(), c.GetMisses(), c.GetEvictions(), c.GetSize())
	}
	return tw.Flush()
}

func formatTime(ts *timestamppb.Timestamp) string {
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// writeJSON prints m as indented protojson. protojson varies its whitespace
// on purpose; re-indenting makes the output stable, so it can be diffed.
func writeJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}

// printable escapes what could move the cursor or rewrite the terminal
// (control characters, and invalid UTF-8, whose 0x9b some terminals read as
// CSI): the strings come from requests and tokens.
func printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
