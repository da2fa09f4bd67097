package deploy

import (
	"testing"
	"time"
)

// TestShutdownFitsGracePeriod: the pod's termination grace period covers
// the preStop delay, the drain period and the shutdown timeout, so that
// Kubernetes never kills a replica with checks in flight.
func TestShutdownFitsGracePeriod(t *testing.T) {
	d := one(t, loadDocs(t), "Deployment")
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
					Containers                    []struct {
						Args      []string `yaml:"args"`
						Lifecycle struct {
							PreStop struct {
								Sleep struct {
									Seconds int `yaml:"seconds"`
								} `yaml:"sleep"`
							} `yaml:"preStop"`
						} `yaml:"lifecycle"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	d.decode(t, &dep)
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if preStop <= 0 {
		t.Fatal("no preStop sleep: the pod would stop answering before the proxies stop sending")
	}
	drain, err := time.ParseDuration(flagValue(t, c.Args, "--drain-period"))
	if err != nil || drain <= 0 {
		t.Fatalf("--drain-period %q: %v", flagValue(t, c.Args, "--drain-period"), err)
	}
	shutdown, err := time.ParseDuration(flagValue(t, c.Args, "--shutdown-timeout"))
	if err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second
	if need := preStop + drain + shutdown; grace < need+5*time.Second {
		t.Fatalf("terminationGracePeriodSeconds %s < preStop %s + drain %s + shutdown %s + 5s margin", grace, preStop, drain, shutdown)
	}
}
