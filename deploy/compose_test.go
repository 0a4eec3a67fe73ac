package deploy

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// loadCompose loads docker-compose.yml as Docker Compose does (interpolation, normalization,
// consistency checks), with the one variable it requires set.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithEnv([]string{"PAYGW_API_TOKEN=test-token"}), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}

// docker-compose.yml holds the services the README promises, publishes only paygw's public port
// and Prometheus on the host's loopback, and its Prometheus scrapes paygw's admin (metrics) port
// with the alert rules of this directory loaded.
func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	want := []string{"mariadb", "migrate", "paygw", "prometheus", "redis"}
	if got := p.ServiceNames(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	published := map[string][]string{}
	for name, s := range p.Services {
		for _, pc := range s.Ports {
			published[name] = append(published[name], pc.HostIP+":"+pc.Published+"->"+itoa(pc.Target))
		}
	}
	wantPorts := map[string][]string{
		"paygw":      {"127.0.0.1:8080->8080"},
		"prometheus": {"127.0.0.1:9091->9090"},
	}
	for name, ports := range wantPorts {
		if !slices.Equal(published[name], ports) {
			t.Errorf("%s publishes %v, want %v", name, published[name], ports)
		}
	}
	for name := range published {
		if _, ok := wantPorts[name]; !ok {
			t.Errorf("%s publishes %v: only paygw and prometheus should", name, published[name])
		}
	}

	paygw := p.Services["paygw"]
	admin := paygw.Environment["PAYGW_ADMIN__ADDR"]
	public := paygw.Environment["PAYGW_HTTP__ADDR"]
	if admin == nil || public == nil {
		t.Fatalf("paygw environment lacks PAYGW_ADMIN__ADDR or PAYGW_HTTP__ADDR: %v", paygw.Environment)
	}
	if port(t, *public) != "8080" {
		t.Errorf("paygw listens on %s, but 8080 is published", *public)
	}
	metricsPort := port(t, *admin)
	for _, pc := range paygw.Ports {
		if itoa(pc.Target) == metricsPort {
			t.Errorf("paygw's admin port %s (metrics, pprof) is published to the host", metricsPort)
		}
	}

	prom := p.Services["prometheus"]
	configFile := ""
	for _, arg := range prom.Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			configFile = v
		}
	}
	var promConfig *types.ConfigObjConfig
	for _, c := range prom.Configs {
		if c.Target == configFile {
			cfg := p.Configs[c.Source]
			promConfig = &cfg
		}
	}
	if promConfig == nil {
		t.Fatalf("prometheus reads %q, which none of its configs mounts (%+v)", configFile, prom.Configs)
	}
	var pc struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(promConfig.Content), &pc); err != nil {
		t.Fatalf("prometheus config: %v\n%s", err, promConfig.Content)
	}
	var targets []string
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	if !slices.Contains(targets, "paygw:"+metricsPort) {
		t.Errorf("prometheus scrapes %v, not paygw's metrics port paygw:%s", targets, metricsPort)
	}
	if len(pc.RuleFiles) == 0 {
		t.Error("prometheus loads no rule files")
	}
	for _, rf := range pc.RuleFiles {
		mounted := false
		for _, v := range prom.Volumes {
			if v.Target != rf {
				continue
			}
			mounted = true
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("rule file %s is mounted from %s: %v", rf, v.Source, err)
			}
			if filepath.Base(v.Source) != "alerts.yml" || filepath.Base(filepath.Dir(v.Source)) != "prometheus" {
				t.Errorf("rule file %s is mounted from %s, not deploy/prometheus/alerts.yml", rf, v.Source)
			}
		}
		if !mounted {
			t.Errorf("rule file %s is not mounted into prometheus", rf)
		}
	}
}
