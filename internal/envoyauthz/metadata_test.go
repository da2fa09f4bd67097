package envoyauthz_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestAllowMetadata: the dynamic metadata of an allowed request, first
// seen (miss) and repeated (hit, the rendered form), is what the golden
// file says: who the caller is (user, issuer, session, client_id, scope,
// the claims the route's rules read), the route, the call and its lineage.
// The response path (ext_proc) reads the caller back from it.
func TestAllowMetadata(t *testing.T) {
	f := newProtoFixture(t)
	tok := token(t, "alice", jwt.MapClaims{"azp": "desktop-app", "session_id": "sess-7", "groups": []any{"admins", "ops"}, "scope": "files:read files:write"})
	body := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_tmp"}}`)
	for _, name := range []string{"miss", "hit"} {
		t.Run(name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "http://mcp.example.com/mcp", bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Mcp-Session-Id", "mcp-sess-1")
			r.Header.Set("X-Root-Context-Id", "root-1")
			res := f.send(t, r, body, envoytest.BuildOptions{})
			if res.status != 200 {
				t.Fatalf("status %d %s", res.status, res.body)
			}
			md := res.metadata
			wantCached := name == "hit"
			if md["cached"] != wantCached {
				t.Fatalf("cached = %v, want %v", md["cached"], wantCached)
			}
			delete(md, "cached")
			got, err := json.MarshalIndent(md, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "allow-metadata.json", append(got, '\n'))
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n%s\nwant:\n%s", name, got, want)
	}
}
