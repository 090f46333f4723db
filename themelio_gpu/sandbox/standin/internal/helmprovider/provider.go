// Package helmprovider is the stand-in for hashicorp/helm 3.1.1 (plugin framework): the provider block and
// helm_release with the real provider's schema, installing, upgrading and uninstalling through the Helm SDK the
// way the real provider does, written for this project from the provider's documented behaviour.
package helmprovider

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"themelio.local/sandbox-standin/internal/kubeconf"
)

// New returns the provider factory.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &HelmProvider{version: version} }
}

// HelmProvider is the provider.
type HelmProvider struct{ version string }

// Meta is what the resources get.
type Meta struct {
	Settings       *cli.EnvSettings
	RegistryClient *registry.Client
	HelmDriver     string
	Kube           kubeconf.Settings
	Burst          int
	QPS            float32
	Experiments    map[string]bool
	mu             sync.Mutex
}

type providerModel struct {
	Debug                types.Bool    `tfsdk:"debug"`
	PluginsPath          types.String  `tfsdk:"plugins_path"`
	RegistryConfigPath   types.String  `tfsdk:"registry_config_path"`
	RepositoryConfigPath types.String  `tfsdk:"repository_config_path"`
	RepositoryCache      types.String  `tfsdk:"repository_cache"`
	HelmDriver           types.String  `tfsdk:"helm_driver"`
	BurstLimit           types.Int64   `tfsdk:"burst_limit"`
	Kubernetes           types.Object  `tfsdk:"kubernetes"`
	Registries           types.List    `tfsdk:"registries"`
	Experiments          *experiments  `tfsdk:"experiments"`
	QPS                  types.Float64 `tfsdk:"qps"`
}

type experiments struct {
	Manifest types.Bool `tfsdk:"manifest"`
}

type registryModel struct {
	URL      types.String `tfsdk:"url"`
	Username types.String `tfsdk:"username"`
	Password types.String `tfsdk:"password"`
}

type kubernetesModel struct {
	Host                  types.String `tfsdk:"host"`
	Username              types.String `tfsdk:"username"`
	Password              types.String `tfsdk:"password"`
	Insecure              types.Bool   `tfsdk:"insecure"`
	TLSServerName         types.String `tfsdk:"tls_server_name"`
	ClientCertificate     types.String `tfsdk:"client_certificate"`
	ClientKey             types.String `tfsdk:"client_key"`
	ClusterCACertificate  types.String `tfsdk:"cluster_ca_certificate"`
	ConfigPaths           types.List   `tfsdk:"config_paths"`
	ConfigPath            types.String `tfsdk:"config_path"`
	ConfigContext         types.String `tfsdk:"config_context"`
	ConfigContextAuthInfo types.String `tfsdk:"config_context_auth_info"`
	ConfigContextCluster  types.String `tfsdk:"config_context_cluster"`
	Token                 types.String `tfsdk:"token"`
	ProxyURL              types.String `tfsdk:"proxy_url"`
	Exec                  *execModel   `tfsdk:"exec"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Env        types.Map    `tfsdk:"env"`
	Args       types.List   `tfsdk:"args"`
}

func (p *HelmProvider) Metadata(ctx context.Context, req provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "helm"
	resp.Version = p.version
}

func optStr(desc string) schema.StringAttribute {
	return schema.StringAttribute{Optional: true, Description: desc}
}

func (p *HelmProvider) Schema(ctx context.Context, req provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Themelio sandbox stand-in for hashicorp/helm 3.1.1 (not HashiCorp's build).",
		Attributes: map[string]schema.Attribute{
			"debug":                  schema.BoolAttribute{Optional: true, Description: "Debug indicates whether or not Helm is running in Debug mode."},
			"plugins_path":           optStr("The path to the helm plugins directory"),
			"registry_config_path":   optStr("The path to the registry config file"),
			"repository_config_path": optStr("The path to the file containing repository names and URLs"),
			"repository_cache":       optStr("The path to the file containing cached repository indexes"),
			"helm_driver": schema.StringAttribute{Optional: true, Description: "The backend storage driver. Values are: configmap, secret, memory, sql",
				Validators: []validator.String{stringvalidator.OneOf(strings.ToLower(driver.MemoryDriverName), strings.ToLower(driver.ConfigMapsDriverName),
					strings.ToLower(driver.SecretsDriverName), strings.ToLower(driver.SQLDriverName))}},
			"burst_limit": schema.Int64Attribute{Optional: true, Description: "Helm burst limit. Increase this if you have a cluster with many CRDs"},
			"kubernetes":  schema.SingleNestedAttribute{Optional: true, Description: "Kubernetes Configuration", Attributes: kubernetesSchema()},
			"registries": schema.ListNestedAttribute{Optional: true, Description: "RegistryClient configuration.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"url":      schema.StringAttribute{Required: true, Description: "OCI URL in form of oci://host:port or oci://host"},
					"username": schema.StringAttribute{Required: true, Description: "The username to use for the OCI HTTP basic authentication when accessing the Kubernetes master endpoint."},
					"password": schema.StringAttribute{Required: true, Description: "The password to use for the OCI HTTP basic authentication when accessing the Kubernetes master endpoint."},
				}}},
			"experiments": schema.SingleNestedAttribute{Optional: true, Description: "Enable and disable experimental features.",
				Attributes: map[string]schema.Attribute{"manifest": schema.BoolAttribute{Optional: true, Description: "Enable full diff by storing the rendered manifest in the state."}}},
			"qps": schema.Float64Attribute{Optional: true, Description: "Queries per second used when communicating with the Kubernetes API. Can be used to avoid throttling."},
		},
	}
}

func kubernetesSchema() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"host":                   optStr("The hostname (in form of URI) of kubernetes master"),
		"username":               optStr("The username to use for HTTP basic authentication when accessing the Kubernetes master endpoint"),
		"password":               optStr("The password to use for HTTP basic authentication when accessing the Kubernetes master endpoint"),
		"insecure":               schema.BoolAttribute{Optional: true, Description: "Whether server should be accessed without verifying the TLS certificate"},
		"tls_server_name":        optStr("Server name passed to the server for SNI and is used in the client to check server certificates against"),
		"client_certificate":     optStr("PEM-encoded client certificate for TLS authentication"),
		"client_key":             optStr("PEM-encoded client certificate key for TLS authentication"),
		"cluster_ca_certificate": optStr("PEM-encoded root certificates bundle for TLS authentication"),
		"config_paths":           schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "A list of paths to kube config files. Can be set with KUBE_CONFIG_PATHS environment variable"},
		"config_path": schema.StringAttribute{Optional: true, Description: "Path to the kube config file. Can be set with KUBE_CONFIG_PATH",
			Validators: []validator.String{stringvalidator.ConflictsWith(path.Root("kubernetes").AtName("config_paths").Expression())}},
		"config_context":           optStr("Context to choose from the config file. Can be sourced from KUBE_CTX"),
		"config_context_auth_info": optStr("Authentication info context of the kube config (name of the kubeconfig user, --user flag in kubectl). Can be sourced from KUBE_CTX_AUTH_INFO"),
		"config_context_cluster":   optStr("Cluster context of the kube config (name of the kubeconfig cluster, --cluster flag in kubectl). Can be sourced from KUBE_CTX_CLUSTER"),
		"token":                    optStr("Token to authenticate a service account"),
		"proxy_url":                optStr("URL to the proxy to be used for all API requests"),
		"exec": schema.SingleNestedAttribute{Optional: true, Description: "Exec configuration for Kubernetes authentication",
			Attributes: map[string]schema.Attribute{
				"api_version": schema.StringAttribute{Required: true, Description: "API version for the exec plugin"},
				"command":     schema.StringAttribute{Required: true, Description: "Command to run for Kubernetes exec plugin"},
				"env":         schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Environment variables for the exec plugin"},
				"args":        schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "Arguments for the exec plugin"},
			}},
	}
}

func envOr(v types.String, env string) string {
	if !v.IsNull() && !v.IsUnknown() {
		return v.ValueString()
	}
	return os.Getenv(env)
}

// Configure reads the provider block over the same environment variables as the real provider (HELM_*, KUBE_*).
func (p *HelmProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	if req.ClientCapabilities.DeferralAllowed && !req.Config.Raw.IsFullyKnown() {
		resp.Deferred = &provider.Deferred{Reason: provider.DeferredReasonProviderConfigUnknown}
	}
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var burst int64
	if s := os.Getenv("HELM_BURST_LIMIT"); s != "" {
		b, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			resp.Diagnostics.AddError("Invalid burst limit", fmt.Sprintf("Invalid burst limit value: %s", s))
			return
		}
		burst = b
	}
	if !cfg.BurstLimit.IsNull() {
		burst = cfg.BurstLimit.ValueInt64()
	}
	var qps float64
	if s := os.Getenv("HELM_QPS"); s != "" {
		q, err := strconv.ParseFloat(s, 64)
		if err != nil {
			resp.Diagnostics.AddError("Invalid QPS value", fmt.Sprintf("Invalid QPS value: %s", s))
			return
		}
		qps = q
	}
	if !cfg.QPS.IsNull() {
		qps = cfg.QPS.ValueFloat64()
	}
	var k kubernetesModel
	if !cfg.Kubernetes.IsNull() && !cfg.Kubernetes.IsUnknown() {
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("kubernetes"), &k)...)
		if resp.Diagnostics.HasError() {
			return
		}
	} else {
		k = kubernetesModel{ConfigPaths: types.ListNull(types.StringType)}
	}
	ks := kubeconf.Settings{HelmHostTLS: true}
	if s := os.Getenv("KUBE_INSECURE"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			resp.Diagnostics.AddError("Invalid insecure value", fmt.Sprintf("Invalid insecure value: %s", s))
			return
		}
		ks.Insecure = b
	}
	if !k.Insecure.IsNull() {
		ks.Insecure = k.Insecure.ValueBool()
	}
	ks.Host = envOr(k.Host, "KUBE_HOST")
	ks.Username = envOr(k.Username, "KUBE_USER")
	ks.Password = envOr(k.Password, "KUBE_PASSWORD")
	ks.TLSServerName = envOr(k.TLSServerName, "KUBE_TLS_SERVER_NAME")
	ks.ClientCertificate = envOr(k.ClientCertificate, "KUBE_CLIENT_CERT_DATA")
	ks.ClientKey = envOr(k.ClientKey, "KUBE_CLIENT_KEY_DATA")
	ks.ClusterCACertificate = envOr(k.ClusterCACertificate, "KUBE_CLUSTER_CA_CERT_DATA")
	ks.ConfigContext = envOr(k.ConfigContext, "KUBE_CTX")
	ks.ConfigContextAuthInfo = envOr(k.ConfigContextAuthInfo, "KUBE_CTX_AUTH_INFO")
	ks.ConfigContextCluster = envOr(k.ConfigContextCluster, "KUBE_CTX_CLUSTER")
	ks.Token = envOr(k.Token, "KUBE_TOKEN")
	ks.ProxyURL = envOr(k.ProxyURL, "KUBE_PROXY_URL")
	// config_path, then config_paths appended; KUBE_CONFIG_PATHS, when set, replaces both
	if p := envOr(k.ConfigPath, "KUBE_CONFIG_PATH"); p != "" {
		ks.ConfigPaths = []string{p}
	}
	if !k.ConfigPaths.IsNull() && !k.ConfigPaths.IsUnknown() {
		var l []string
		resp.Diagnostics.Append(k.ConfigPaths.ElementsAs(ctx, &l, false)...)
		ks.ConfigPaths = append(ks.ConfigPaths, l...)
	}
	if v := os.Getenv("KUBE_CONFIG_PATHS"); v != "" {
		ks.ConfigPaths = kubeconf.SplitPathList(v)
	}
	if k.Exec != nil && !k.Exec.APIVersion.IsNull() && !k.Exec.Command.IsNull() {
		e := &kubeconf.Exec{APIVersion: k.Exec.APIVersion.ValueString(), Command: k.Exec.Command.ValueString(), Env: map[string]string{}}
		if !k.Exec.Args.IsNull() && !k.Exec.Args.IsUnknown() {
			resp.Diagnostics.Append(k.Exec.Args.ElementsAs(ctx, &e.Args, false)...)
		}
		if !k.Exec.Env.IsNull() && !k.Exec.Env.IsUnknown() {
			resp.Diagnostics.Append(k.Exec.Env.ElementsAs(ctx, &e.Env, false)...)
		}
		ks.Exec = e
	}
	settings := cli.New()
	settings.Debug = os.Getenv("HELM_DEBUG") == "true" || cfg.Debug.ValueBool()
	if v := envOr(cfg.PluginsPath, "HELM_PLUGINS_PATH"); v != "" {
		settings.PluginsDirectory = v
	}
	if v := envOr(cfg.RegistryConfigPath, "HELM_REGISTRY_CONFIG_PATH"); v != "" {
		settings.RegistryConfig = v
	}
	if v := envOr(cfg.RepositoryConfigPath, "HELM_REPOSITORY_CONFIG_PATH"); v != "" {
		settings.RepositoryConfig = v
	}
	if v := envOr(cfg.RepositoryCache, "HELM_REPOSITORY_CACHE"); v != "" {
		settings.RepositoryCache = v
	}
	manifest := false
	if cfg.Experiments != nil {
		manifest = cfg.Experiments.Manifest.ValueBool()
	}
	if manifest {
		resp.Diagnostics.AddWarning("experiments.manifest is not implemented by the themelio sandbox stand-in",
			"The stand-in plans and stores helm_release as with the experiment off (manifest and resources null).")
	}
	rc, err := registry.NewClient()
	if err != nil {
		resp.Diagnostics.AddError("Registry client initialization failed", fmt.Sprintf("Unable to create Helm registry client: %s", err))
		return
	}
	m := &Meta{Settings: settings, RegistryClient: rc, HelmDriver: envOr(cfg.HelmDriver, "HELM_DRIVER"), Kube: ks,
		Burst: int(burst), QPS: float32(qps), Experiments: map[string]bool{"manifest": manifest}}
	if !cfg.Registries.IsUnknown() && !cfg.Registries.IsNull() {
		var regs []registryModel
		resp.Diagnostics.Append(cfg.Registries.ElementsAs(ctx, &regs, false)...)
		if resp.Diagnostics.HasError() {
			return
		}
		for _, r := range regs {
			if r.URL.IsNull() || r.Username.IsNull() || r.Password.IsNull() {
				resp.Diagnostics.AddError("OCI Registry login failed", "Registry URL, Username, or Password is null")
				return
			}
			if err := m.registryLogin(r.URL.ValueString(), r.Username.ValueString(), r.Password.ValueString()); err != nil {
				resp.Diagnostics.AddError("OCI Registry login failed", err.Error())
				return
			}
		}
	}
	resp.DataSourceData = m
	resp.ResourceData = m
}

func (m *Meta) registryLogin(ociURL, username, password string) error {
	u, err := url.Parse(ociURL)
	if err != nil {
		return fmt.Errorf("could not parse OCI registry URL: %v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.RegistryClient.Login(u.Host, registry.LoginOptBasicAuth(username, password)); err != nil {
		return fmt.Errorf("could not login to OCI registry %q: %v", u.Host, err)
	}
	return nil
}

func (p *HelmProvider) DataSources(ctx context.Context) []func() datasource.DataSource { return nil }

func (p *HelmProvider) Resources(ctx context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &Release{} }}
}

// kubeGetter is the RESTClientGetter Helm's action configuration takes.
type kubeGetter struct {
	cc    clientcmd.ClientConfig
	burst int
	qps   float32
}

func (k *kubeGetter) ToRESTConfig() (*rest.Config, error) { return k.cc.ClientConfig() }

func (k *kubeGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	c, err := k.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c.Burst, c.QPS = k.burst, k.qps
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return nil, err
	}
	return memory.NewMemCacheClient(dc), nil
}

func (k *kubeGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := k.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	m := restmapper.NewDeferredDiscoveryRESTMapper(dc)
	return restmapper.NewShortcutExpander(m, dc, func(w string) { fmt.Fprintf(os.Stderr, "Warning: %s\n", w) }), nil
}

func (k *kubeGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return k.cc }

// helmConfig is the action configuration for a namespace.
func (m *Meta) helmConfig(ctx context.Context, namespace string) (*action.Configuration, error) {
	ks := m.Kube
	ks.Namespace = "default"
	if namespace != "" {
		ks.Namespace = namespace
	}
	cc, err := ks.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg := new(action.Configuration)
	if err := cfg.Init(&kubeGetter{cc: cc, burst: m.Burst, qps: m.QPS}, namespace, m.HelmDriver, func(format string, v ...interface{}) {
		fmt.Fprintf(os.Stderr, "[DEBUG] helm: "+format+"\n", v...)
	}); err != nil {
		return nil, err
	}
	return cfg, nil
}
