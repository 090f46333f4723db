package helmprovider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"helm.sh/helm/v3/pkg/action"
)

// How repository and chart become a chart reference, as in the real provider: an absolute folder parses as a
// request URI and is taken for a chart repository URL (LocateChart then fails: no protocol handler), a relative
// folder is prefixed to the chart name (a local chart), oci:// joins the chart to the path.
func TestChartReference(t *testing.T) {
	for _, c := range []struct{ repo, chart, name, repoURL string }{
		{"/srv/charts", "gpu-operator", "gpu-operator", "/srv/charts"},
		{"./charts", "gpu-operator", "./charts/gpu-operator", ""},
		{"https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "gpu-operator", "https://helm.ngc.nvidia.com/nvidia"},
		{"oci://registry.k8s.io/dra-driver-nvidia/charts", "dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", ""},
	} {
		m := &releaseModel{Chart: types.StringValue(c.chart), Repository: types.StringValue(c.repo), Version: types.StringValue("1.0.0")}
		cpo, name, d := chartPathOptions(m, &action.ChartPathOptions{})
		if d.HasError() {
			t.Fatal(d)
		}
		if name != c.name || cpo.RepoURL != c.repoURL {
			t.Errorf("%s + %s: name %q repoURL %q", c.repo, c.chart, name, cpo.RepoURL)
		}
	}
}

func TestValuesMerge(t *testing.T) {
	v1, _ := types.ListValueFrom(t.Context(), types.StringType, []string{"a:\n  b: 1\n  c: 2\n", "a:\n  c: 3\n"})
	m := &releaseModel{Values: v1, Set: types.ListNull(types.ObjectType{}), SetSensitive: types.ListNull(types.ObjectType{}), SetList: types.ListNull(types.ObjectType{})}
	got, d := getValues(t.Context(), m)
	if d.HasError() {
		t.Fatal(d)
	}
	a := got["a"].(map[string]interface{})
	if a["b"] != float64(1) || a["c"] != float64(3) {
		t.Errorf("%v", got)
	}
}
