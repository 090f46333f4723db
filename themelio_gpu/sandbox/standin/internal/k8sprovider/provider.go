// Package k8sprovider is the stand-in's plugin-SDK half of hashicorp/kubernetes 2.38.0: the provider block and
// the resources the stacks use (kubernetes_labels, kubernetes_node_taint, kubernetes_config_map_v1,
// kubernetes_namespace_v1 and their unversioned aliases), with the real provider's schemas and API calls,
// written for this project from the provider's documented behaviour.
package k8sprovider

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"

	"github.com/hashicorp/go-cty/cty"
	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"themelio.local/sandbox-standin/internal/kubeconf"
	"themelio.local/sandbox-standin/internal/standin"
)

const defaultFieldManagerName = "Terraform"

// Version is set by main from the -X main.version ldflag.
var Version = "dev"

// Provider returns the plugin-SDK provider.
func Provider() *schema.Provider {
	p := &schema.Provider{
		Schema: ProviderSchema(),
		ResourcesMap: map[string]*schema.Resource{
			"kubernetes_labels":        resourceLabels(),
			"kubernetes_node_taint":    resourceNodeTaint(),
			"kubernetes_config_map":    resourceConfigMapV1(),
			"kubernetes_config_map_v1": resourceConfigMapV1(),
			"kubernetes_namespace":     resourceNamespaceV1(),
			"kubernetes_namespace_v1":  resourceNamespaceV1(),
		},
	}
	p.ConfigureProvider = func(ctx context.Context, req schema.ConfigureProviderRequest, res *schema.ConfigureProviderResponse) {
		if req.DeferralAllowed && !req.ResourceData.GetRawConfig().IsWhollyKnown() {
			res.Deferred = &schema.Deferred{Reason: schema.DeferredReasonProviderConfigUnknown}
		}
		res.Meta, res.Diagnostics = configure(req.ResourceData, p.TerraformVersion)
	}
	return p
}

// ProviderSchema is the provider block of hashicorp/kubernetes 2.38.0.
func ProviderSchema() map[string]*schema.Schema {
	env := schema.EnvDefaultFunc
	return map[string]*schema.Schema{
		"host":                     {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_HOST", ""), Description: "The hostname (in form of URI) of Kubernetes master."},
		"username":                 {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_USER", ""), Description: "The username to use for HTTP basic authentication when accessing the Kubernetes master endpoint."},
		"password":                 {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_PASSWORD", ""), Description: "The password to use for HTTP basic authentication when accessing the Kubernetes master endpoint."},
		"insecure":                 {Type: schema.TypeBool, Optional: true, DefaultFunc: env("KUBE_INSECURE", false), Description: "Whether server should be accessed without verifying the TLS certificate."},
		"tls_server_name":          {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_TLS_SERVER_NAME", ""), Description: "Server name passed to the server for SNI and is used in the client to check server certificates against."},
		"client_certificate":       {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_CLIENT_CERT_DATA", ""), Description: "PEM-encoded client certificate for TLS authentication."},
		"client_key":               {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_CLIENT_KEY_DATA", ""), Description: "PEM-encoded client certificate key for TLS authentication."},
		"cluster_ca_certificate":   {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_CLUSTER_CA_CERT_DATA", ""), Description: "PEM-encoded root certificates bundle for TLS authentication."},
		"config_paths":             {Type: schema.TypeList, Elem: &schema.Schema{Type: schema.TypeString}, Optional: true, Description: "A list of paths to kube config files. Can be set with KUBE_CONFIG_PATHS environment variable."},
		"config_path":              {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_CONFIG_PATH", nil), Description: "Path to the kube config file. Can be set with KUBE_CONFIG_PATH.", ConflictsWith: []string{"config_paths"}},
		"config_context":           {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_CTX", "")},
		"config_context_auth_info": {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_CTX_AUTH_INFO", ""), Description: ""},
		"config_context_cluster":   {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_CTX_CLUSTER", ""), Description: ""},
		"token":                    {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_TOKEN", ""), Description: "Token to authenticate an service account"},
		"proxy_url":                {Type: schema.TypeString, Optional: true, DefaultFunc: env("KUBE_PROXY_URL", ""), Description: "URL to the proxy to be used for all API requests"},
		"exec": {
			Type: schema.TypeList, Optional: true, MaxItems: 1, Description: "",
			Elem: &schema.Resource{Schema: map[string]*schema.Schema{
				"api_version": {Type: schema.TypeString, Required: true, ValidateDiagFunc: func(v interface{}, _ cty.Path) diag.Diagnostics {
					if v.(string) == "client.authentication.k8s.io/v1alpha1" {
						return diag.Diagnostics{{Severity: diag.Warning,
							Summary: "v1alpha1 of the client authentication API is deprecated, use v1beta1 or above",
							Detail:  "v1alpha1 of the client authentication API will be removed in Kubernetes client versions 1.24 and above. You may need to update your exec plugin to use the latest version."}}
					}
					return nil
				}},
				"command": {Type: schema.TypeString, Required: true},
				"env":     {Type: schema.TypeMap, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}},
				"args":    {Type: schema.TypeList, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}},
			}},
		},
		"experiments": {
			Type: schema.TypeList, MaxItems: 1, Optional: true, Description: "Enable and disable experimental features.",
			Elem: &schema.Resource{Schema: map[string]*schema.Schema{
				"manifest_resource": {
					Type: schema.TypeBool, Optional: true,
					DefaultFunc: func() (interface{}, error) {
						if v := os.Getenv("TF_X_KUBERNETES_MANIFEST_RESOURCE"); v != "" {
							b, err := strconv.ParseBool(v)
							if err != nil {
								return true, err
							}
							return b, nil
						}
						return true, nil
					},
					Description: "Enable the `kubernetes_manifest` resource.",
					Deprecated:  "The kubernetes_manifest resource is now permanently enabled and no longer considered an experiment. This flag has no effect and will be removed in the near future.",
				},
			}},
		},
		"ignore_annotations": {Type: schema.TypeList, Elem: &schema.Schema{Type: schema.TypeString, ValidateFunc: validation.StringIsValidRegExp}, Optional: true, Description: "List of Kubernetes metadata annotations to ignore across all resources handled by this provider for situations where external systems are managing certain resource annotations. Each item is a regular expression."},
		"ignore_labels":      {Type: schema.TypeList, Elem: &schema.Schema{Type: schema.TypeString, ValidateFunc: validation.StringIsValidRegExp}, Optional: true, Description: "List of Kubernetes metadata labels to ignore across all resources handled by this provider for situations where external systems are managing certain resource labels. Each item is a regular expression."},
	}
}

// Meta is what resources get: the REST config, clients made on first use, and the ignore lists.
type Meta struct {
	config            *rest.Config
	IgnoreAnnotations []string
	IgnoreLabels      []string

	mu        sync.Mutex
	main      *kubernetes.Clientset
	dyn       dynamic.Interface
	discovery discovery.DiscoveryInterface
}

// Main returns the typed clientset.
func (m *Meta) Main() (*kubernetes.Clientset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.main == nil {
		c, err := kubernetes.NewForConfig(m.config)
		if err != nil {
			return nil, fmt.Errorf("Failed to configure client: %s", err)
		}
		m.main = c
	}
	return m.main, nil
}

// Dynamic returns the dynamic client.
func (m *Meta) Dynamic() (dynamic.Interface, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dyn == nil {
		c, err := dynamic.NewForConfig(m.config)
		if err != nil {
			return nil, fmt.Errorf("Failed to configure dynamic client: %s", err)
		}
		m.dyn = c
	}
	return m.dyn, nil
}

// Discovery returns the discovery client.
func (m *Meta) Discovery() (discovery.DiscoveryInterface, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.discovery == nil {
		c, err := discovery.NewDiscoveryClientForConfig(m.config)
		if err != nil {
			return nil, fmt.Errorf("Failed to configure discovery client: %s", err)
		}
		m.discovery = c
	}
	return m.discovery, nil
}

func stringList(v interface{}) []string {
	l, _ := v.([]interface{})
	out := make([]string, len(l))
	for i, e := range l {
		if e != nil {
			out[i] = e.(string)
		}
	}
	return out
}

// SettingsFromResourceData reads the provider block as the real provider does: config_path, else config_paths,
// else KUBE_CONFIG_PATHS; context overrides only with a kubeconfig; static settings over them.
func SettingsFromResourceData(d *schema.ResourceData) kubeconf.Settings {
	s := kubeconf.Settings{}
	if v, ok := d.Get("config_path").(string); ok && v != "" {
		s.ConfigPaths = []string{v}
	} else if v, ok := d.Get("config_paths").([]interface{}); ok && len(v) > 0 {
		s.ConfigPaths = stringList(v)
	} else if v := os.Getenv("KUBE_CONFIG_PATHS"); v != "" {
		s.ConfigPaths = kubeconf.SplitPathList(v)
	}
	if len(s.ConfigPaths) > 0 {
		if v, ok := d.GetOk("config_context"); ok {
			s.ConfigContext = v.(string)
		}
		if v, ok := d.GetOk("config_context_auth_info"); ok {
			s.ConfigContextAuthInfo = v.(string)
		}
		if v, ok := d.GetOk("config_context_cluster"); ok {
			s.ConfigContextCluster = v.(string)
		}
	}
	if v, ok := d.GetOk("insecure"); ok {
		s.Insecure = v.(bool)
	}
	str := func(k string) string {
		if v, ok := d.GetOk(k); ok {
			return v.(string)
		}
		return ""
	}
	s.TLSServerName = str("tls_server_name")
	s.ClusterCACertificate = str("cluster_ca_certificate")
	s.ClientCertificate = str("client_certificate")
	s.Host = str("host")
	s.Username = str("username")
	s.Password = str("password")
	s.ClientKey = str("client_key")
	s.Token = str("token")
	s.ProxyURL = str("proxy_url")
	if v, ok := d.GetOk("exec"); ok {
		if spec, ok := v.([]interface{})[0].(map[string]interface{}); ok {
			e := &kubeconf.Exec{APIVersion: spec["api_version"].(string), Command: spec["command"].(string),
				Args: stringList(spec["args"]), Env: map[string]string{}}
			for k, vv := range spec["env"].(map[string]interface{}) {
				e.Env[k] = vv.(string)
			}
			s.Exec = e
		}
	}
	return s
}

func configure(d *schema.ResourceData, terraformVersion string) (interface{}, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := SettingsFromResourceData(d)
	cfg, err := s.RESTConfig()
	if err != nil {
		// as the real provider: a warning, and a client that will fail (or reach localhost) later
		log.Printf("[WARN] Provider was supplied an invalid configuration. Further operations likely to fail: %v", err)
		diags = append(diags, diag.Diagnostic{Severity: diag.Warning,
			Summary: "Provider was supplied an invalid configuration. Further operations likely to fail.", Detail: err.Error()})
		cfg = &rest.Config{}
	}
	cfg.UserAgent = standin.UserAgent("kubernetes", Version, terraformVersion)
	return &Meta{config: cfg, IgnoreAnnotations: stringList(d.Get("ignore_annotations")),
		IgnoreLabels: stringList(d.Get("ignore_labels"))}, diags
}
