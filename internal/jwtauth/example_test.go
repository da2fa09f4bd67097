package jwtauth_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/extauthz/extauthz/internal/jwtauth"
)

func Example() {
	secret := []byte("an-hmac-secret-of-at-least-32-bytes")
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

	v, err := jwtauth.New(context.Background(), []jwtauth.IssuerSpec{
		{Name: "dev", Issuer: "https://dev.example", Secret: secret},
	}, jwtauth.Options{Now: now})
	if err != nil {
		panic(err)
	}
	defer v.Close()

	token, err := jwtauth.SignHMAC("HS256", secret, map[string]any{
		"iss": "https://dev.example", "sub": "alice", "session_id": "s-1", "aud": "mcp",
		"exp": now().Add(time.Hour).Unix(),
	})
	if err != nil {
		panic(err)
	}
	claims, err := v.Verify(context.Background(), token, []string{"dev"}, []string{"mcp"})
	// Claims other than the registered ones are decoded when read.
	session, _ := claims.Claim("session_id")
	fmt.Println(claims.IssuerName, claims.Subject, session, err)

	_, err = v.Verify(context.Background(), token, nil, []string{"other"})
	fmt.Println(errors.Is(err, jwtauth.ErrAudience), err)
	// Output:
	// dev alice s-1 <nil>
	// true token audience is not accepted here
}
