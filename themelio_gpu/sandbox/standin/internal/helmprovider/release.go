package helmprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	pathpkg "path"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/yaml"
)

// Release is helm_release.
type Release struct{ meta *Meta }

type releaseModel struct {
	Atomic                   types.Bool       `tfsdk:"atomic"`
	Chart                    types.String     `tfsdk:"chart"`
	CleanupOnFail            types.Bool       `tfsdk:"cleanup_on_fail"`
	CreateNamespace          types.Bool       `tfsdk:"create_namespace"`
	DependencyUpdate         types.Bool       `tfsdk:"dependency_update"`
	Description              types.String     `tfsdk:"description"`
	Devel                    types.Bool       `tfsdk:"devel"`
	DisableCrdHooks          types.Bool       `tfsdk:"disable_crd_hooks"`
	DisableOpenapiValidation types.Bool       `tfsdk:"disable_openapi_validation"`
	DisableWebhooks          types.Bool       `tfsdk:"disable_webhooks"`
	ForceUpdate              types.Bool       `tfsdk:"force_update"`
	ID                       types.String     `tfsdk:"id"`
	Keyring                  types.String     `tfsdk:"keyring"`
	Lint                     types.Bool       `tfsdk:"lint"`
	Manifest                 types.String     `tfsdk:"manifest"`
	MaxHistory               types.Int64      `tfsdk:"max_history"`
	Metadata                 types.Object     `tfsdk:"metadata"`
	Name                     types.String     `tfsdk:"name"`
	Namespace                types.String     `tfsdk:"namespace"`
	PassCredentials          types.Bool       `tfsdk:"pass_credentials"`
	PostRender               *postRenderModel `tfsdk:"postrender"`
	Resources                types.Map        `tfsdk:"resources"`
	RecreatePods             types.Bool       `tfsdk:"recreate_pods"`
	Replace                  types.Bool       `tfsdk:"replace"`
	RenderSubchartNotes      types.Bool       `tfsdk:"render_subchart_notes"`
	Repository               types.String     `tfsdk:"repository"`
	RepositoryCaFile         types.String     `tfsdk:"repository_ca_file"`
	RepositoryCertFile       types.String     `tfsdk:"repository_cert_file"`
	RepositoryKeyFile        types.String     `tfsdk:"repository_key_file"`
	RepositoryPassword       types.String     `tfsdk:"repository_password"`
	RepositoryUsername       types.String     `tfsdk:"repository_username"`
	ResetValues              types.Bool       `tfsdk:"reset_values"`
	ReuseValues              types.Bool       `tfsdk:"reuse_values"`
	SetWO                    types.List       `tfsdk:"set_wo"`
	SetWORevision            types.Int64      `tfsdk:"set_wo_revision"`
	Set                      types.List       `tfsdk:"set"`
	SetList                  types.List       `tfsdk:"set_list"`
	SetSensitive             types.List       `tfsdk:"set_sensitive"`
	SkipCrds                 types.Bool       `tfsdk:"skip_crds"`
	Status                   types.String     `tfsdk:"status"`
	TakeOwnership            types.Bool       `tfsdk:"take_ownership"`
	Timeout                  types.Int64      `tfsdk:"timeout"`
	Timeouts                 timeouts.Value   `tfsdk:"timeouts"`
	UpgradeInstall           types.Bool       `tfsdk:"upgrade_install"`
	Values                   types.List       `tfsdk:"values"`
	Verify                   types.Bool       `tfsdk:"verify"`
	Version                  types.String     `tfsdk:"version"`
	Wait                     types.Bool       `tfsdk:"wait"`
	WaitForJobs              types.Bool       `tfsdk:"wait_for_jobs"`
}

type setModel struct {
	Name  types.String `tfsdk:"name"`
	Type  types.String `tfsdk:"type"`
	Value types.String `tfsdk:"value"`
}

type setListModel struct {
	Name  types.String `tfsdk:"name"`
	Value types.List   `tfsdk:"value"`
}

type postRenderModel struct {
	Args       types.List   `tfsdk:"args"`
	BinaryPath types.String `tfsdk:"binary_path"`
}

func metadataAttrTypes() map[string]attr.Type {
	return map[string]attr.Type{
		"name": types.StringType, "revision": types.Int64Type, "namespace": types.StringType, "chart": types.StringType,
		"version": types.StringType, "app_version": types.StringType, "values": types.StringType,
		"first_deployed": types.Int64Type, "last_deployed": types.Int64Type, "notes": types.StringType,
	}
}

func (r *Release) Metadata(ctx context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_release"
}

func (r *Release) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	m, ok := req.ProviderData.(*Meta)
	if !ok {
		resp.Diagnostics.AddError("Provider Configuration Error", fmt.Sprintf("Unexpected ProviderData type: %T", req.ProviderData))
		return
	}
	r.meta = m
}

// ---- plan modifiers and defaults of the real schema ----

type stateIfEmpty struct{}

func (stateIfEmpty) Description(context.Context) string {
	return "Suppress changes if the new description is an empty string"
}
func (m stateIfEmpty) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }
func (stateIfEmpty) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.PlanValue.IsNull() || req.PlanValue.ValueString() == "" {
		resp.PlanValue = req.StateValue
	}
}

type develIfVersion struct{}

func (develIfVersion) Description(context.Context) string {
	return "Suppress changes if the version is set"
}
func (m develIfVersion) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }
func (develIfVersion) PlanModifyBool(ctx context.Context, req planmodifier.BoolRequest, resp *planmodifier.BoolResponse) {
	var v types.String
	req.Plan.GetAttribute(ctx, path.Root("version"), &v)
	if !v.IsNull() && v.ValueString() != "" && req.ConfigValue.IsNull() {
		resp.PlanValue = req.StateValue
	}
}

type keyringIfNoVerify struct{}

func (keyringIfNoVerify) Description(context.Context) string {
	return "Suppress changes if verify is false"
}
func (m keyringIfNoVerify) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }
func (keyringIfNoVerify) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	var v types.Bool
	req.Plan.GetAttribute(ctx, path.Root("verify"), &v)
	if !v.IsNull() && !v.ValueBool() {
		resp.PlanValue = req.StateValue
	}
}

type namespaceDefault struct{}

func (namespaceDefault) Description(context.Context) string {
	return "If namespace is not provided, defaults to HELM_NAMESPACE environment variable or 'default'."
}
func (d namespaceDefault) MarkdownDescription(ctx context.Context) string { return d.Description(ctx) }
func (namespaceDefault) DefaultString(ctx context.Context, req defaults.StringRequest, resp *defaults.StringResponse) {
	ns := os.Getenv("HELM_NAMESPACE")
	if ns == "" {
		ns = "default"
	}
	resp.PlanValue = types.StringValue(ns)
}

func optBool(def bool, desc string) schema.BoolAttribute {
	return schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(def), Description: desc}
}

func (r *Release) Schema(ctx context.Context, req resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Version:     2,
		Description: "A Helm release (themelio sandbox stand-in for hashicorp/helm 3.1.1).",
		Attributes: map[string]schema.Attribute{
			"atomic":            optBool(false, "If set, installation process purges chart on fail. The wait flag will be set automatically if atomic is used"),
			"chart":             schema.StringAttribute{Required: true, Description: "Chart name to be installed. A path may be used"},
			"cleanup_on_fail":   optBool(false, "Allow deletion of new resources created in this upgrade when upgrade fails"),
			"create_namespace":  optBool(false, "Create the namespace if it does not exist"),
			"dependency_update": optBool(false, "Run helm dependency update before installing the chart"),
			"description": schema.StringAttribute{Optional: true, Computed: true, Description: "Add a custom description",
				PlanModifiers: []planmodifier.String{stateIfEmpty{}}},
			"devel": schema.BoolAttribute{Optional: true, Description: "Use chart development versions, too. Equivalent to version '>0.0.0-0'. If `version` is set, this is ignored",
				PlanModifiers: []planmodifier.Bool{develIfVersion{}}},
			"disable_crd_hooks":          optBool(false, "Prevent CRD hooks from running, but run other hooks.  See helm install --no-crd-hook"),
			"disable_openapi_validation": optBool(false, "If set, the installation process will not validate rendered templates against the Kubernetes OpenAPI Schema"),
			"disable_webhooks":           optBool(false, "Prevent hooks from running"),
			"force_update":               optBool(false, "Force resource update through delete/recreate if needed."),
			"id":                         schema.StringAttribute{Computed: true},
			"keyring": schema.StringAttribute{Optional: true, Description: "Location of public keys used for verification, Used only if `verify is true`",
				PlanModifiers: []planmodifier.String{keyringIfNoVerify{}}},
			"lint":        optBool(false, "Run helm lint when planning"),
			"manifest":    schema.StringAttribute{Computed: true, Description: "The rendered manifest as JSON."},
			"max_history": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(0), Description: "Limit the maximum number of revisions saved per release. Use 0 for no limit"},
			"metadata": schema.SingleNestedAttribute{Computed: true, Description: "Status of the deployed release.",
				Attributes: map[string]schema.Attribute{
					"app_version":    schema.StringAttribute{Computed: true, Description: "The version number of the application being deployed"},
					"chart":          schema.StringAttribute{Computed: true, Description: "The name of the chart"},
					"first_deployed": schema.Int64Attribute{Computed: true, Description: "FirstDeployed is an int64 which represents timestamp when the release was first deployed."},
					"last_deployed":  schema.Int64Attribute{Computed: true, Description: "LastDeployed is an int64 which represents timestamp when the release was last deployed."},
					"name":           schema.StringAttribute{Computed: true, Description: "Name is the name of the release"},
					"namespace":      schema.StringAttribute{Computed: true, Description: "Namespace is the kubernetes namespace of the release"},
					"notes":          schema.StringAttribute{Computed: true, Description: "Notes is the description of the deployed release, rendered from templates."},
					"revision":       schema.Int64Attribute{Computed: true, Description: "Version is an int32 which represents the version of the release"},
					"values":         schema.StringAttribute{Computed: true, Description: "Set of extra values. added to the chart. The sensitive data is cloaked. JSON encoded."},
					"version":        schema.StringAttribute{Computed: true, Description: "A SemVer 2 conformant version string of the chart"},
				}},
			"name": schema.StringAttribute{Required: true, Description: "Release name. The length must not be longer than 53 characters",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{stringvalidator.LengthBetween(1, 53)}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: namespaceDefault{}, Description: "Namespace to install the release into",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"pass_credentials":      optBool(false, "Pass credentials to all domains"),
			"recreate_pods":         optBool(false, "Perform pods restart during upgrade/rollback"),
			"render_subchart_notes": optBool(true, "If set, render subchart notes along with the parent"),
			"replace":               optBool(false, "Re-use the given name, even if that name is already used. This is unsafe in production"),
			"repository":            schema.StringAttribute{Optional: true, Description: "Repository where to locate the requested chart. If it is a URL, the chart is installed without installing the repository"},
			"repository_ca_file":    schema.StringAttribute{Optional: true, Description: "The Repositories CA file"},
			"repository_cert_file":  schema.StringAttribute{Optional: true, Description: "The repositories cert file"},
			"repository_key_file":   schema.StringAttribute{Optional: true, Description: "The repositories cert key file"},
			"repository_password":   schema.StringAttribute{Optional: true, Sensitive: true, Description: "Password for HTTP basic authentication"},
			"repository_username":   schema.StringAttribute{Optional: true, Description: "Username for HTTP basic authentication"},
			"reset_values":          optBool(false, "When upgrading, reset the values to the ones built into the chart"),
			"reuse_values":          optBool(false, "When upgrading, reuse the last release's values and merge in any overrides. If 'reset_values' is specified, this is ignored"),
			"resources":             schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "The kubernetes resources created by this release."},
			"skip_crds":             optBool(false, "If set, no CRDs will be installed. By default, CRDs are installed if not already present"),
			"status":                schema.StringAttribute{Computed: true, Description: "Status of the release"},
			"take_ownership":        optBool(false, "If set, allows Helm to adopt existing resources not marked as managed by the release."),
			"timeout":               schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(300), Description: "Time in seconds to wait for any individual kubernetes operation"},
			"timeouts":              timeouts.Attributes(ctx, timeouts.Opts{Create: true, Read: true, Update: true, Delete: true}),
			"values":                schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "List of values in raw YAML format to pass to helm"},
			"verify":                optBool(false, "Verify the package before installing it."),
			"version":               schema.StringAttribute{Optional: true, Computed: true, Description: "Specify the exact chart version to install. If this is not specified, the latest version is installed"},
			"wait":                  optBool(true, "Will wait until all resources are in a ready state before marking the release as successful."),
			"wait_for_jobs":         optBool(false, "If wait is enabled, will wait until all Jobs have been completed before marking the release as successful."),
			"set": schema.ListNestedAttribute{Optional: true, Description: "Custom values to be merged with the values",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":  schema.StringAttribute{Required: true},
					"value": schema.StringAttribute{Optional: true},
					"type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(""),
						Validators: []validator.String{stringvalidator.OneOf("auto", "string", "literal")}},
				}}},
			"set_wo": schema.ListNestedAttribute{Optional: true, WriteOnly: true, Description: "Custom values to be merged with the values",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":  schema.StringAttribute{Required: true, WriteOnly: true},
					"value": schema.StringAttribute{Required: true, WriteOnly: true},
					"type": schema.StringAttribute{Optional: true, WriteOnly: true,
						Validators: []validator.String{stringvalidator.OneOf("auto", "string")}},
				}}},
			"set_wo_revision": schema.Int64Attribute{Optional: true, Description: "The current revision of the write-only \"set_wo\" attribute. Incrementing this integer value will cause Terraform to update the write-only value.",
				Validators: []validator.Int64{int64validator.AtLeast(1)}},
			"set_list": schema.ListNestedAttribute{Optional: true, Description: "Custom sensitive values to be merged with the values",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":  schema.StringAttribute{Required: true},
					"value": schema.ListAttribute{Required: true, ElementType: types.StringType},
				}}},
			"set_sensitive": schema.ListNestedAttribute{Optional: true, Description: "Custom sensitive values to be merged with the values",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":  schema.StringAttribute{Required: true},
					"value": schema.StringAttribute{Required: true, Sensitive: true},
					"type": schema.StringAttribute{Optional: true,
						Validators: []validator.String{stringvalidator.OneOf("auto", "string", "literal")}},
				}}},
			"upgrade_install": optBool(false, "If true, the provider will install the release at the specified version even if a release not controlled by the provider is present: this is equivalent to running 'helm upgrade --install' with the Helm CLI. WARNING: this may not be suitable for production use -- see the 'Upgrade Mode' note in the provider documentation. Defaults to `false`."),
			"postrender": schema.SingleNestedAttribute{Optional: true, Description: "Postrender command config",
				Attributes: map[string]schema.Attribute{
					"args":        schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "An argument to the post-renderer (can specify multiple)"},
					"binary_path": schema.StringAttribute{Required: true, Description: "The common binary path"},
				}},
		},
	}
}

// ---- chart location, values ----

func useChartVersion(chartName, repo string) bool {
	if _, err := url.ParseRequestURI(chartName); err == nil && !registry.IsOCI(chartName) {
		return true
	}
	if _, err := os.Stat(chartName); err == nil {
		return true
	}
	if _, err := os.Stat(repo); err == nil {
		return true
	}
	return false
}

// chartPathOptions: an OCI repository becomes part of the chart reference; a repository that parses as a
// request URI (http(s) URLs, and absolute paths) is a chart repository URL; anything else is prefixed to the
// chart name (a relative folder "./charts" gives the local chart "./charts/<chart>").
func chartPathOptions(m *releaseModel, cpo *action.ChartPathOptions) (*action.ChartPathOptions, string, diag.Diagnostics) {
	var diags diag.Diagnostics
	chartName := m.Chart.ValueString()
	repository := m.Repository.ValueString()
	var repositoryURL string
	if registry.IsOCI(repository) {
		u, err := url.Parse(repository)
		if err != nil {
			diags.AddError("Invalid Repository URL", fmt.Sprintf("Failed to parse repository URL %s: %s", repository, err))
			return nil, "", diags
		}
		u.Path = pathpkg.Join(u.Path, chartName)
		chartName = u.String()
	} else {
		name := strings.TrimSpace(chartName)
		if _, err := url.ParseRequestURI(repository); err == nil {
			repositoryURL = repository
		} else if !strings.Contains(name, "/") && repository != "" {
			name = fmt.Sprintf("%s/%s", repository, name)
		}
		chartName = name
	}
	version := strings.TrimSpace(m.Version.ValueString())
	if version == "" && m.Devel.ValueBool() {
		version = ">0.0.0-0"
	}
	cpo.CaFile = m.RepositoryCaFile.ValueString()
	cpo.CertFile = m.RepositoryCertFile.ValueString()
	cpo.KeyFile = m.RepositoryKeyFile.ValueString()
	cpo.Keyring = m.Keyring.ValueString()
	cpo.RepoURL = repositoryURL
	cpo.Verify = m.Verify.ValueBool()
	if !useChartVersion(chartName, cpo.RepoURL) {
		cpo.Version = version
	}
	cpo.Username = m.RepositoryUsername.ValueString()
	cpo.Password = m.RepositoryPassword.ValueString()
	cpo.PassCredentialsAll = m.PassCredentials.ValueBool()
	return cpo, chartName, diags
}

func (r *Release) getChart(name string, cpo *action.ChartPathOptions) (*chart.Chart, string, diag.Diagnostics) {
	var diags diag.Diagnostics
	p, err := cpo.LocateChart(name, r.meta.Settings)
	if err != nil {
		diags.AddError("Error locating chart", fmt.Sprintf("Unable to locate chart %s: %s", name, err))
		return nil, "", diags
	}
	c, err := loader.Load(p)
	if err != nil {
		diags.AddError("Error loading chart", fmt.Sprintf("Unable to load chart %s: %s", p, err))
		return nil, "", diags
	}
	return c, p, diags
}

func (r *Release) checkDependencies(m *releaseModel, c *chart.Chart, p string) (bool, diag.Diagnostics) {
	var diags diag.Diagnostics
	if reqs := c.Metadata.Dependencies; reqs != nil {
		if err := action.CheckDependencies(c, reqs); err != nil {
			if m.DependencyUpdate.ValueBool() {
				man := &downloader.Manager{Out: os.Stderr, ChartPath: p, Keyring: m.Keyring.ValueString(), SkipUpdate: false,
					Getters: getter.All(r.meta.Settings), RepositoryConfig: r.meta.Settings.RepositoryConfig,
					RepositoryCache: r.meta.Settings.RepositoryCache, Debug: r.meta.Settings.Debug, RegistryClient: r.meta.RegistryClient}
				if err := man.Update(); err != nil {
					diags.AddError("", fmt.Sprintf("Failed to update chart dependencies: %s", err))
				}
				return true, diags
			}
			diags.AddError("", "Found in Chart.yaml, but missing in charts/ directory")
			return false, diags
		}
	}
	return false, diags
}

func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if vm, ok := v.(map[string]interface{}); ok {
			if bv, ok := out[k].(map[string]interface{}); ok {
				out[k] = mergeMaps(bv, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func applySet(base map[string]interface{}, s setModel) diag.Diagnostics {
	var diags diag.Diagnostics
	name, value := s.Name.ValueString(), s.Value.ValueString()
	switch s.Type.ValueString() {
	case "auto", "":
		if err := strvals.ParseInto(fmt.Sprintf("%s=%s", name, value), base); err != nil {
			diags.AddError("Failed parsing value", fmt.Sprintf("Failed parsing key %q with value %s: %s", name, value, err))
		}
	case "string":
		if err := strvals.ParseIntoString(fmt.Sprintf("%s=%s", name, value), base); err != nil {
			diags.AddError("Failed parsing string value", fmt.Sprintf("Failed parsing key %q with value %s: %s", name, value, err))
		}
	case "literal":
		var lit interface{}
		if err := yaml.Unmarshal([]byte(fmt.Sprintf("%s: %s", name, value)), &lit); err != nil {
			diags.AddError("Failed parsing literal value", fmt.Sprintf("Key %q with literal value %s: %s", name, value, err))
			return diags
		}
		if m, ok := lit.(map[string]interface{}); ok {
			base[name] = m[name]
		} else {
			base[name] = lit
		}
	default:
		diags.AddError("Unexpected type", fmt.Sprintf("Unexpected type: %s", s.Type.ValueString()))
	}
	return diags
}

func getValues(ctx context.Context, m *releaseModel) (map[string]interface{}, diag.Diagnostics) {
	base := map[string]interface{}{}
	var diags diag.Diagnostics
	for _, raw := range m.Values.Elements() {
		if raw.IsNull() {
			continue
		}
		s, ok := raw.(types.String)
		if !ok {
			diags.AddError("Type Error", fmt.Sprintf("Expected types.String, got %T", raw))
			return nil, diags
		}
		if s.ValueString() == "" {
			continue
		}
		cur := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s.ValueString()), &cur); err != nil {
			diags.AddError("Error unmarshaling values", fmt.Sprintf("---> %v %s", err, s.ValueString()))
			return nil, diags
		}
		base = mergeMaps(base, cur)
	}
	for _, l := range []types.List{m.Set, m.SetSensitive} {
		if l.IsNull() || l.IsUnknown() {
			continue
		}
		var sets []setModel
		diags.Append(l.ElementsAs(ctx, &sets, false)...)
		if diags.HasError() {
			return nil, diags
		}
		for _, s := range sets {
			diags.Append(applySet(base, s)...)
			if diags.HasError() {
				return nil, diags
			}
		}
	}
	if !m.SetList.IsNull() && !m.SetList.IsUnknown() {
		var sls []setListModel
		diags.Append(m.SetList.ElementsAs(ctx, &sls, false)...)
		for _, sl := range sls {
			if sl.Value.IsNull() {
				diags.AddError("Null List Value", "The list value is null.")
				return nil, diags
			}
			var parts []string
			for _, e := range sl.Value.Elements() {
				if !e.IsNull() {
					parts = append(parts, e.(types.String).ValueString())
				}
			}
			if err := strvals.ParseInto(fmt.Sprintf("%s={%s}", sl.Name.ValueString(), strings.Join(parts, ",")), base); err != nil {
				diags.AddError("Error parsing list value", fmt.Sprintf("Failed parsing key %q with value %s: %s", sl.Name.ValueString(), strings.Join(parts, ","), err))
				return nil, diags
			}
		}
	}
	return base, diags
}

func getWriteOnlyValues(ctx context.Context, m *releaseModel) (map[string]interface{}, diag.Diagnostics) {
	base := map[string]interface{}{}
	var diags diag.Diagnostics
	if m.SetWO.IsNull() || m.SetWO.IsUnknown() {
		return base, diags
	}
	var sets []setModel
	diags.Append(m.SetWO.ElementsAs(ctx, &sets, false)...)
	for _, s := range sets {
		diags.Append(applySet(base, s)...)
	}
	return base, diags
}

func cloakSensitive(ctx context.Context, values map[string]interface{}, m *releaseModel) {
	if m.SetSensitive.IsNull() || m.SetSensitive.IsUnknown() {
		return
	}
	var sets []setModel
	if m.SetSensitive.ElementsAs(ctx, &sets, false).HasError() {
		return
	}
	for _, s := range sets {
		keys := strings.Split(s.Name.ValueString(), ".")
		cur := values
		ok := true
		for _, k := range keys[:len(keys)-1] {
			next, isMap := cur[k].(map[string]interface{})
			if !isMap {
				ok = false
				break
			}
			cur = next
		}
		if ok {
			cur[keys[len(keys)-1]] = "(sensitive value)"
		}
	}
}

func deepClone(m map[string]interface{}) map[string]interface{} {
	if m == nil {
		return nil
	}
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		if vm, ok := v.(map[string]interface{}); ok {
			out[k] = deepClone(vm)
		} else {
			out[k] = v
		}
	}
	return out
}

func versionsEqual(a, b string) bool { return strings.TrimPrefix(a, "v") == strings.TrimPrefix(b, "v") }

// setReleaseAttributes: the state from the release Helm stored.
func setReleaseAttributes(ctx context.Context, st *releaseModel, rel *release.Release) diag.Diagnostics {
	var diags diag.Diagnostics
	st.Resources = types.MapNull(types.StringType)
	st.Manifest = types.StringNull()
	st.Name = types.StringValue(rel.Name)
	if v := rel.Chart.Metadata.Version; !versionsEqual(v, st.Version.ValueString()) {
		st.Version = types.StringValue(v)
	}
	st.Namespace = types.StringValue(rel.Namespace)
	st.Status = types.StringValue(rel.Info.Status.String())
	st.ID = types.StringValue(rel.Name)
	values := "{}"
	if rel.Config != nil {
		c := deepClone(rel.Config)
		cloakSensitive(ctx, c, st)
		b, err := json.Marshal(c)
		if err != nil {
			diags.AddError("Error marshaling values", fmt.Sprintf("unable to marshal values: %s", err))
			return diags
		}
		values = string(b)
	}
	if st.SetWORevision.ValueInt64() > 0 {
		values = "{}"
	}
	obj, d := types.ObjectValue(metadataAttrTypes(), map[string]attr.Value{
		"name": types.StringValue(rel.Name), "revision": types.Int64Value(int64(rel.Version)),
		"namespace": types.StringValue(rel.Namespace), "chart": types.StringValue(rel.Chart.Metadata.Name),
		"version": types.StringValue(rel.Chart.Metadata.Version), "app_version": types.StringValue(rel.Chart.Metadata.AppVersion),
		"values": types.StringValue(values), "first_deployed": types.Int64Value(rel.Info.FirstDeployed.Unix()),
		"last_deployed": types.Int64Value(rel.Info.LastDeployed.Unix()), "notes": types.StringValue(rel.Info.Notes),
	})
	diags.Append(d...)
	st.Metadata = obj
	return diags
}

var errReleaseNotFound = fmt.Errorf("release: not found")

func getRelease(cfg *action.Configuration, name string) (*release.Release, error) {
	rel, err := action.NewGet(cfg).Run(name)
	if err != nil {
		if strings.Contains(err.Error(), "release: not found") {
			return nil, errReleaseNotFound
		}
		return nil, err
	}
	return rel, nil
}

func (r *Release) releaseExists(ctx context.Context, name, namespace string) (bool, diag.Diagnostics) {
	var diags diag.Diagnostics
	cfg, err := r.meta.helmConfig(ctx, namespace)
	if err != nil {
		diags.AddError("Error getting helm configuration", fmt.Sprintf("Unable to get Helm configuration for namespace %s: %s", namespace, err))
		return false, diags
	}
	_, err = getRelease(cfg, name)
	if err == nil {
		return true, diags
	}
	if err == errReleaseNotFound {
		return false, diags
	}
	diags.AddError("Error checking release existence", fmt.Sprintf("Error checking release %s in namespace %s: %s", name, namespace, err))
	return false, diags
}

func installedVersion(cfg *action.Configuration, name string) (string, error) {
	h := action.NewHistory(cfg)
	h.Max = 1
	hist, err := h.Run(name)
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return "", nil
		}
		return "", err
	}
	return hist[0].Chart.Metadata.Version, nil
}

func postRenderer(m *releaseModel) (postrender.PostRenderer, diag.Diagnostics) {
	var diags diag.Diagnostics
	if m.PostRender == nil || m.PostRender.BinaryPath.ValueString() == "" {
		return nil, diags
	}
	var args []string
	for _, a := range m.PostRender.Args.Elements() {
		args = append(args, a.(types.String).ValueString())
	}
	pr, err := postrender.NewExec(m.PostRender.BinaryPath.ValueString(), args...)
	if err != nil {
		diags.AddError("Error creating post-renderer", fmt.Sprintf("Could not create post-renderer: %s", err))
	}
	return pr, diags
}

// ociLogin: with a username and password and an oci:// repository or chart, log in first.
func (r *Release) ociLogin(cfg *action.Configuration, m *releaseModel) diag.Diagnostics {
	var diags diag.Diagnostics
	cfg.RegistryClient = r.meta.RegistryClient
	oci := ""
	if registry.IsOCI(m.Repository.ValueString()) {
		oci = m.Repository.ValueString()
	} else if registry.IsOCI(m.Chart.ValueString()) {
		oci = m.Chart.ValueString()
	}
	if oci != "" && m.RepositoryUsername.ValueString() != "" && m.RepositoryPassword.ValueString() != "" {
		if err := r.meta.registryLogin(oci, m.RepositoryUsername.ValueString(), m.RepositoryPassword.ValueString()); err != nil {
			diags.AddError("OCI Registry Login Failed", fmt.Sprintf("Failed to log in to OCI registry %q: %s", oci, err.Error()))
		}
	}
	return diags
}

func (r *Release) prepare(ctx context.Context, m *releaseModel, cpo *action.ChartPathOptions) (*chart.Chart, *action.ChartPathOptions, diag.Diagnostics) {
	cpo, name, diags := chartPathOptions(m, cpo)
	if diags.HasError() {
		return nil, nil, diags
	}
	c, p, d := r.getChart(name, cpo)
	diags.Append(d...)
	if diags.HasError() {
		return nil, nil, diags
	}
	updated, d := r.checkDependencies(m, c, p)
	diags.Append(d...)
	if diags.HasError() {
		return nil, nil, diags
	}
	if updated {
		var err error
		if c, err = loader.Load(p); err != nil {
			diags.AddError("Error loading chart", fmt.Sprintf("Could not load chart: %s", err))
			return nil, nil, diags
		}
	}
	return c, cpo, diags
}

func (r *Release) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var st, config releaseModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &st)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	to, d := st.Timeouts.Create(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	if r.meta == nil {
		resp.Diagnostics.AddError("Initialization Error", "Meta instance is not initialized")
		return
	}
	ns := st.Namespace.ValueString()
	cfg, err := r.meta.helmConfig(ctx, ns)
	if err != nil {
		resp.Diagnostics.AddError("Error getting helm configuration", fmt.Sprintf("Unable to get Helm configuration for namespace %s: %s", ns, err))
		return
	}
	resp.Diagnostics.Append(r.ociLogin(cfg, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	client := action.NewInstall(cfg)
	c, cpo, d := r.prepare(ctx, &st, &client.ChartPathOptions)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	values, d := getValues(ctx, &st)
	resp.Diagnostics.Append(d...)
	if config.SetWORevision.ValueInt64() > 0 {
		wo, d := getWriteOnlyValues(ctx, &config)
		resp.Diagnostics.Append(d...)
		if len(wo) > 0 {
			values = mergeMaps(values, wo)
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	switch c.Metadata.Type {
	case "", "application":
	default:
		resp.Diagnostics.AddError("Error checking if chart is installable", fmt.Sprintf("Chart is not installable: %s charts are not installable", c.Metadata.Type))
		return
	}
	pr, d := postRenderer(&st)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	client.ClientOnly = false
	client.DryRun = false
	client.DisableHooks = st.DisableWebhooks.ValueBool()
	client.Wait = st.Wait.ValueBool()
	client.WaitForJobs = st.WaitForJobs.ValueBool()
	client.Devel = st.Devel.ValueBool()
	client.DependencyUpdate = st.DependencyUpdate.ValueBool()
	client.TakeOwnership = st.TakeOwnership.ValueBool()
	client.Timeout = time.Duration(st.Timeout.ValueInt64()) * time.Second
	client.Namespace = ns
	client.ReleaseName = st.Name.ValueString()
	client.Atomic = st.Atomic.ValueBool()
	client.SkipCRDs = st.SkipCrds.ValueBool()
	client.SubNotes = st.RenderSubchartNotes.ValueBool()
	client.DisableOpenAPIValidation = st.DisableOpenapiValidation.ValueBool()
	client.Replace = st.Replace.ValueBool()
	client.Description = st.Description.ValueString()
	client.CreateNamespace = st.CreateNamespace.ValueBool()
	client.PostRenderer = pr

	var rel *release.Release
	exists := false
	if st.UpgradeInstall.ValueBool() {
		v, err := installedVersion(cfg, client.ReleaseName)
		if err != nil {
			resp.Diagnostics.AddError("Error checking installed release", fmt.Sprintf("Failed to determine if release exists: %s", err))
			return
		}
		exists = v != ""
	}
	if exists {
		up := action.NewUpgrade(cfg)
		up.ChartPathOptions = *cpo
		up.DryRun = false
		up.DisableHooks = st.DisableWebhooks.ValueBool()
		up.Wait = st.Wait.ValueBool()
		up.Devel = st.Devel.ValueBool()
		up.Timeout = time.Duration(st.Timeout.ValueInt64()) * time.Second
		up.Namespace = ns
		up.Atomic = st.Atomic.ValueBool()
		up.SkipCRDs = st.SkipCrds.ValueBool()
		up.SubNotes = st.RenderSubchartNotes.ValueBool()
		up.DisableOpenAPIValidation = st.DisableOpenapiValidation.ValueBool()
		up.Description = st.Description.ValueString()
		up.PostRenderer = pr
		rel, err = up.Run(client.ReleaseName, c, values)
	} else {
		rel, err = client.Run(c, values)
	}
	if err != nil && rel == nil {
		resp.Diagnostics.AddError("installation failed", err.Error())
		return
	}
	if err != nil {
		ok, d := r.releaseExists(ctx, st.Name.ValueString(), ns)
		resp.Diagnostics.Append(d...)
		if resp.Diagnostics.HasError() {
			return
		}
		if !ok {
			resp.Diagnostics.AddError("installation failed", err.Error())
			return
		}
		resp.Diagnostics.Append(setReleaseAttributes(ctx, &st, rel)...)
		resp.Diagnostics.AddWarning("Helm release created with warnings", fmt.Sprintf("Helm release %q was created but has a failed status. Use the `helm` command to investigate the error, correct it, then run Terraform again.", client.ReleaseName))
		resp.Diagnostics.AddError("Helm release error", err.Error())
		// the real provider returns here without setting the state: Terraform records nothing for this release
		return
	}
	resp.Diagnostics.Append(setReleaseAttributes(ctx, &st, rel)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *Release) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st releaseModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	to, d := st.Timeouts.Read(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	if r.meta == nil {
		resp.Diagnostics.AddError("Meta not set", "The meta information is not set for the resource")
		return
	}
	ok, d := r.releaseExists(ctx, st.Name.ValueString(), st.Namespace.ValueString())
	if !ok {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(d...)
	cfg, err := r.meta.helmConfig(ctx, st.Namespace.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Error getting helm configuration", fmt.Sprintf("Unable to get Helm configuration for namespace %s: %s", st.Namespace.ValueString(), err))
		return
	}
	rel, err := getRelease(cfg, st.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Error getting release", fmt.Sprintf("Unable to get Helm release %s: %s", st.Name.ValueString(), err))
		return
	}
	resp.Diagnostics.Append(setReleaseAttributes(ctx, &st, rel)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *Release) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, st, config releaseModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	to, d := plan.Timeouts.Update(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	ns := st.Namespace.ValueString()
	cfg, err := r.meta.helmConfig(ctx, ns)
	if err != nil {
		resp.Diagnostics.AddError("Error getting helm configuration", fmt.Sprintf("Unable to get Helm configuration for namespace %s: %s", ns, err))
		return
	}
	resp.Diagnostics.Append(r.ociLogin(cfg, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	client := action.NewUpgrade(cfg)
	c, _, d := r.prepare(ctx, &plan, &client.ChartPathOptions)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	client.Devel = plan.Devel.ValueBool()
	client.Namespace = plan.Namespace.ValueString()
	client.TakeOwnership = plan.TakeOwnership.ValueBool()
	client.Timeout = time.Duration(plan.Timeout.ValueInt64()) * time.Second
	client.Wait = plan.Wait.ValueBool()
	client.WaitForJobs = plan.WaitForJobs.ValueBool()
	client.DryRun = false
	client.DisableHooks = plan.DisableWebhooks.ValueBool()
	client.Atomic = plan.Atomic.ValueBool()
	client.SkipCRDs = plan.SkipCrds.ValueBool()
	client.SubNotes = plan.RenderSubchartNotes.ValueBool()
	client.DisableOpenAPIValidation = plan.DisableOpenapiValidation.ValueBool()
	client.Force = plan.ForceUpdate.ValueBool()
	client.ResetValues = plan.ResetValues.ValueBool()
	client.ReuseValues = plan.ReuseValues.ValueBool()
	client.Recreate = plan.RecreatePods.ValueBool()
	client.MaxHistory = int(plan.MaxHistory.ValueInt64())
	client.CleanupOnFail = plan.CleanupOnFail.ValueBool()
	client.Description = plan.Description.ValueString()
	pr, d := postRenderer(&plan)
	resp.Diagnostics.Append(d...)
	client.PostRenderer = pr
	values, d := getValues(ctx, &plan)
	resp.Diagnostics.Append(d...)
	if plan.SetWORevision.ValueInt64() > st.SetWORevision.ValueInt64() {
		wo, d := getWriteOnlyValues(ctx, &config)
		resp.Diagnostics.Append(d...)
		if len(wo) > 0 {
			values = mergeMaps(values, wo)
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	rel, err := client.Run(plan.Name.ValueString(), c, values)
	if err != nil {
		resp.Diagnostics.AddError("Error upgrading chart", fmt.Sprintf("Upgrade failed: %s", err))
		return
	}
	resp.Diagnostics.Append(setReleaseAttributes(ctx, &plan, rel)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *Release) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st releaseModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	to, d := st.Timeouts.Delete(ctx, 20*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	if r.meta == nil {
		resp.Diagnostics.AddError("Meta not set", "The meta information is not set for the resource")
		return
	}
	name, ns := st.Name.ValueString(), st.Namespace.ValueString()
	ok, d := r.releaseExists(ctx, name, ns)
	if !ok {
		return
	}
	resp.Diagnostics.Append(d...)
	cfg, err := r.meta.helmConfig(ctx, ns)
	if err != nil {
		resp.Diagnostics.AddError("Error getting helm configuration", fmt.Sprintf("Unable to get Helm configuration for namespace %s: %s", ns, err))
		return
	}
	un := action.NewUninstall(cfg)
	un.Wait = st.Wait.ValueBool()
	un.DisableHooks = st.DisableWebhooks.ValueBool()
	un.Timeout = time.Duration(st.Timeout.ValueInt64()) * time.Second
	res, err := un.Run(name)
	if err != nil {
		resp.Diagnostics.AddError("Error uninstalling release", fmt.Sprintf("Unable to uninstall Helm release %s: %s", name, err))
		return
	}
	if res.Info != "" {
		resp.Diagnostics.AddWarning("Helm uninstall returned an information message", res.Info)
	}
}

func (r *Release) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.AddError("Import is not supported by the themelio sandbox stand-in", "helm_release import is not implemented by this stand-in provider.")
}

// ModifyPlan: the chart is located and loaded at every plan (so an unreachable repository fails the plan), the
// planned status is always "deployed", version comes from the chart and must match the configured one, and
// metadata is recomputed when chart, repository, version, values or sets changed.
func (r *Release) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, config releaseModel
	var st *releaseModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.meta == nil {
		return // provider not configured yet (validation)
	}
	ns := plan.Namespace.ValueString()
	cfg, err := r.meta.helmConfig(ctx, ns)
	if err != nil {
		resp.Diagnostics.AddError("Error getting Helm configuration", err.Error())
		return
	}
	resp.Diagnostics.Append(r.ociLogin(cfg, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.Status = types.StringValue(release.StatusDeployed.String())
	if !useChartVersion(plan.Chart.ValueString(), plan.Repository.ValueString()) && st != nil && !plan.Version.Equal(st.Version) {
		o := strings.TrimPrefix(st.Version.String(), "v")
		n := strings.TrimPrefix(plan.Version.String(), "v")
		if o != n && n != "" {
			plan.Metadata = types.ObjectUnknown(metadataAttrTypes())
		}
	}
	if plan.Chart.IsUnknown() || plan.Repository.IsUnknown() || plan.Version.IsUnknown() && !config.Version.IsNull() {
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	client := action.NewInstall(cfg)
	c, cpo, d := r.prepare(ctx, &plan, &client.ChartPathOptions)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.Lint.ValueBool() {
		values, d := getValues(ctx, &plan)
		resp.Diagnostics.Append(d...)
		if resp.Diagnostics.HasError() {
			return
		}
		_, name, _ := chartPathOptions(&plan, &action.ChartPathOptions{})
		p, err := cpo.LocateChart(name, r.meta.Settings)
		if err == nil {
			res := action.NewLint().Run([]string{p}, values)
			if len(res.Errors) > 0 {
				var msgs []string
				for _, msg := range res.Messages {
					for _, e := range res.Errors {
						if e == msg.Err {
							msgs = append(msgs, fmt.Sprintf("%s: %s", msg.Path, msg.Err))
							break
						}
					}
				}
				err = fmt.Errorf("malformed chart or values: \n\t%s", strings.Join(msgs, "\n\t"))
			}
		}
		if err != nil {
			resp.Diagnostics.AddError("Lint Error", err.Error())
			return
		}
	}
	plan.Manifest = types.StringNull()
	plan.Resources = types.MapNull(types.StringType)
	if plan.UpgradeInstall.ValueBool() && config.Version.IsNull() {
		iv, err := installedVersion(cfg, plan.Name.ValueString())
		if err != nil {
			resp.Diagnostics.AddError("Failed to check installed release version", err.Error())
			return
		}
		switch {
		case iv != "":
			plan.Version = types.StringValue(iv)
		case len(c.Metadata.Version) > 0:
			plan.Version = types.StringValue(c.Metadata.Version)
		default:
			plan.Version = types.StringNull()
		}
	} else {
		if len(c.Metadata.Version) > 0 {
			plan.Version = types.StringValue(c.Metadata.Version)
		} else {
			plan.Version = types.StringNull()
		}
		if !config.Version.IsNull() && !config.Version.Equal(plan.Version) {
			if versionsEqual(config.Version.ValueString(), plan.Version.ValueString()) {
				plan.Version = config.Version
			} else {
				resp.Diagnostics.AddError("Planned version is different from configured version",
					fmt.Sprintf(`The version in the configuration is %q but the planned version is %q. 
You should update the version in your configuration to %[2]q, or remove the version attribute from your configuration.`, config.Version.ValueString(), plan.Version.ValueString()))
				return
			}
		}
	}
	if recomputeMetadata(plan, st) {
		plan.Metadata = types.ObjectUnknown(metadataAttrTypes())
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func recomputeMetadata(plan releaseModel, st *releaseModel) bool {
	if st == nil {
		return true
	}
	return !plan.Chart.Equal(st.Chart) || !plan.Repository.Equal(st.Repository) || !plan.Version.Equal(st.Version) ||
		!plan.Values.Equal(st.Values) || !plan.Set.Equal(st.Set) || !plan.SetSensitive.Equal(st.SetSensitive) ||
		!plan.SetList.Equal(st.SetList)
}
