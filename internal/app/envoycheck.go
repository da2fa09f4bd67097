package app

import (
	"fmt"
	"os"
	"strings"

	"github.com/extauthz/extauthz/internal/envoyconfig"
)

var envoyCheckCmd = command{
	name: "envoy-check",
	args: "FILE...",
	summary: "Check Envoy, Istio and Envoy Gateway configuration offline: an Envoy bootstrap (YAML or JSON;\n" +
		"strict schema, validation rules, cluster names, the ext_authz filter), an IstioOperator or\n" +
		"mesh config with extension providers, EnvoyFilter, AuthorizationPolicy (CUSTOM) and\n" +
		"SecurityPolicy. Every problem is listed with its line; exit 1 when there is one.",
	examples: []string{"extauthz envoy-check envoy/envoy.yaml deploy/istio/*.yaml deploy/envoy-gateway/securitypolicies.yaml"},
}

func envoyCheckCommand(args []string, env Env) error {
	fs := envoyCheckCmd.flagSet()
	if err := envoyCheckCmd.parseFlags(fs, args, env.Stdout, -1); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return envoyCheckCmd.usageErr(fs, fmt.Errorf("envoy-check: at least one FILE is required"))
	}
	failed := 0
	for _, path := range fs.Args() {
		b, err := os.ReadFile(path)
		if err == nil {
			err = envoyconfig.CheckFile(b)
		}
		if err != nil {
			failed++
			fmt.Fprintf(env.Stderr, "%s:\n", path)
			for _, l := range strings.Split(err.Error(), "\n") {
				fmt.Fprintf(env.Stderr, "  %s\n", l)
			}
			continue
		}
		fmt.Fprintf(env.Stdout, "%s: ok\n", path)
		for _, r := range envoyconfig.Requirements(b) {
			fmt.Fprintf(env.Stdout, "  needs %s\n", r)
		}
	}
	if failed > 0 {
		fmt.Fprintf(env.Stderr, "%s of %d failed\n", plural(failed, "file"), fs.NArg())
		return errReported
	}
	return nil
}
