package toolsheader

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolsHeader is the route's tools_header.header; UserHeader its
// identity.user_header. extauthz sets both on every request it allows and
// removes clients' copies.
const (
	ToolsHeader = "X-Extauthz-Tools"
	UserHeader  = "X-User-Id"
)

// ToolsClaims are the claims of extauthz's tools token.
type ToolsClaims struct {
	Tools   []string `json:"tools"`   // the tools the caller may call
	Depends []string `json:"depends"` // those of them whose rules decide on the arguments
	jwt.RegisteredClaims
}

// VerifyTools checks a tools token: signed with a key of the lineage JWK
// set, of type extauthz-tools+jwt, from issuer (lineage.signing.issuer),
// for route (aud), not expired, about user.
func VerifyTools(ctx context.Context, keys jwkset.Storage, issuer, route, user, token string) (*ToolsClaims, error) {
	var c ToolsClaims
	_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if t.Header["typ"] != "extauthz-tools+jwt" {
			return nil, errors.New("not a tools token")
		}
		kid, _ := t.Header["kid"].(string)
		// An unknown kid refreshes the key set: bounded, so that a forged
		// token cannot hold the request.
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		jwk, err := keys.KeyRead(ctx, kid)
		if err != nil {
			return nil, err
		}
		return jwk.Key(), nil
	}, jwt.WithValidMethods([]string{"EdDSA", "ES256"}), jwt.WithIssuer(issuer), jwt.WithAudience(route),
		jwt.WithExpirationRequired(), jwt.WithLeeway(30*time.Second))
	if err != nil {
		return nil, err
	}
	if c.Subject != user {
		return nil, errors.New("the tools token is about another user")
	}
	return &c, nil
}

// FilterTools is go-sdk middleware: tools/list answers keep only the tools
// the request's tools header allows, none when it is missing or does not
// verify.
func FilterTools(keys jwkset.Storage, issuer, route string, log *slog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			list, ok := res.(*mcp.ListToolsResult)
			if err != nil || !ok {
				return res, err
			}
			var allowed []string
			if extra := req.GetExtra(); extra != nil && extra.Header != nil {
				c, err := VerifyTools(ctx, keys, issuer, route, extra.Header.Get(UserHeader), extra.Header.Get(ToolsHeader))
				if err != nil {
					log.WarnContext(ctx, "tools header refused: listing no tools", "error", err)
				} else {
					allowed = c.Tools
				}
			}
			kept := make([]*mcp.Tool, 0, len(list.Tools))
			for _, t := range list.Tools {
				if slices.Contains(allowed, t.Name) {
					kept = append(kept, t)
				}
			}
			list.Tools = kept
			// The list is this caller's: no shared cache may serve it to
			// another (go-sdk marks lists "public" by default).
			list.CacheScope = "private"
			return list, nil
		}
	}
}
