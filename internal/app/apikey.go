package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
)

var apikeyCmd = command{
	name: "apikey new",
	summary: "Generate an API key: print the key (ek_ and 32 random bytes, shown only this once) on the first line,\n" +
		"then the entry to add to the API-key issuer's keys file, which holds only the key's SHA-256 digest.",
	examples: []string{"extauthz apikey new --subject billing-agent --scopes tools.call,invoices.read"},
}

// apikeyCommand runs "apikey new".
func apikeyCommand(args []string, env Env) error {
	fs := apikeyCmd.flagSet()
	subject := fs.String("subject", "", "the key's subject (user id); required")
	scopes := fs.String("scopes", "", "comma-separated scopes")
	id := fs.String("id", "", "the key's id in logs and revocations (default: random)")
	expires := fs.String("expires", "", "expiry, RFC 3339")
	routes := fs.String("routes", "", "comma-separated routes the key is limited to")
	if len(args) > 0 && args[0] == "new" {
		args = args[1:]
	} else if len(args) == 0 || !isHelp(args[0]) {
		return apikeyCmd.usageErr(fs, errors.New(`apikey: the only subcommand is "new"`))
	}
	if err := apikeyCmd.parseFlags(fs, args, env.Stdout, 0); err != nil {
		return err
	}
	var problems []error
	if *subject == "" {
		problems = append(problems, errors.New("--subject is required"))
	}
	var exp *time.Time
	if *expires != "" {
		t, err := time.Parse(time.RFC3339, *expires)
		if err != nil {
			problems = append(problems, fmt.Errorf("--expires %q: not RFC 3339", *expires))
		}
		exp = &t
	}
	if err := errors.Join(problems...); err != nil {
		return apikeyCmd.usageErr(fs, err)
	}
	key, entry, err := apikey.NewEntry(*id, *subject, splitList(*scopes))
	if err != nil {
		return apikeyCmd.usageErr(fs, err)
	}
	entry.Expires, entry.Routes = exp, splitList(*routes)
	doc, err := entry.YAML()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s\n\n# Add to the keys file (the key above is not stored anywhere):\n%s", key, doc)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
