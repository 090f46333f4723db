package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"themelio.local/sandbox-standin/internal/kubeconf"
	"themelio.local/sandbox-standin/internal/standin"
)

// Server serves kubernetes_manifest over protocol 5, beside the plugin-SDK resources (muxed in main).
type Server struct {
	tfprotov5.ProviderServer // not implemented RPCs (none is routed here: this server owns one resource)

	ProviderConfigType tftypes.Type // the provider block's type, from the plugin-SDK half's schema
	Version            string

	mu            sync.Mutex
	config        *rest.Config
	configUnknown bool
	configured    bool

	dynOnce    sync.Once
	dyn        dynamic.Interface
	dynErr     error
	mapperOnce sync.Once
	mapper     meta.RESTMapper
	mapperErr  error
	oapiOnce   sync.Once
	oapi       *openAPIv2
	oapiErr    error
	crdsOnce   sync.Once
	crds       []unstructured.Unstructured
	crdsErr    error
	credsOnce  sync.Once
	credsDiags []*tfprotov5.Diagnostic
	restOnce   sync.Once
	restClient rest.Interface
	restErr    error
}

func (s *Server) GetMetadata(ctx context.Context, _ *tfprotov5.GetMetadataRequest) (*tfprotov5.GetMetadataResponse, error) {
	return &tfprotov5.GetMetadataResponse{Resources: []tfprotov5.ResourceMetadata{{TypeName: typeName_}}}, nil
}

func (s *Server) GetProviderSchema(ctx context.Context, _ *tfprotov5.GetProviderSchemaRequest) (*tfprotov5.GetProviderSchemaResponse, error) {
	return &tfprotov5.GetProviderSchemaResponse{
		ResourceSchemas:   map[string]*tfprotov5.Schema{typeName_: resourceSchema()},
		DataSourceSchemas: map[string]*tfprotov5.Schema{},
	}, nil
}

func (s *Server) GetResourceIdentitySchemas(ctx context.Context, _ *tfprotov5.GetResourceIdentitySchemasRequest) (*tfprotov5.GetResourceIdentitySchemasResponse, error) {
	return &tfprotov5.GetResourceIdentitySchemasResponse{IdentitySchemas: map[string]*tfprotov5.ResourceIdentitySchema{}}, nil
}

func (s *Server) GetFunctions(ctx context.Context, _ *tfprotov5.GetFunctionsRequest) (*tfprotov5.GetFunctionsResponse, error) {
	return &tfprotov5.GetFunctionsResponse{Functions: map[string]*tfprotov5.Function{}}, nil
}

func (s *Server) PrepareProviderConfig(ctx context.Context, req *tfprotov5.PrepareProviderConfigRequest) (*tfprotov5.PrepareProviderConfigResponse, error) {
	return &tfprotov5.PrepareProviderConfigResponse{}, nil
}

func (s *Server) StopProvider(ctx context.Context, _ *tfprotov5.StopProviderRequest) (*tfprotov5.StopProviderResponse, error) {
	return &tfprotov5.StopProviderResponse{}, nil
}

func strAttr(cfg map[string]tftypes.Value, name, env string) string {
	if v, ok := cfg[name]; ok && !v.IsNull() && v.IsKnown() {
		var s string
		if v.As(&s) == nil {
			return s
		}
	}
	if env != "" {
		return os.Getenv(env)
	}
	return ""
}

func strList(v tftypes.Value) []string {
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	var l []tftypes.Value
	_ = v.As(&l)
	out := []string{}
	for _, e := range l {
		var s string
		if e.As(&s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// ConfigureProvider reads the same provider block as the plugin-SDK half, with the same environment defaults.
func (s *Server) ConfigureProvider(ctx context.Context, req *tfprotov5.ConfigureProviderRequest) (*tfprotov5.ConfigureProviderResponse, error) {
	resp := &tfprotov5.ConfigureProviderResponse{}
	cfgVal, err := req.Config.Unmarshal(s.ProviderConfigType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to decode ConfigureProvider request parameter", err.Error()))
		return resp, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configUnknown = !cfgVal.IsFullyKnown()
	var cfg map[string]tftypes.Value
	if err := cfgVal.As(&cfg); err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to decode provider configuration", err.Error()))
		return resp, nil
	}
	st := kubeconf.Settings{}
	if p := strAttr(cfg, "config_path", "KUBE_CONFIG_PATH"); p != "" {
		st.ConfigPaths = []string{p}
	} else if l := strList(cfg["config_paths"]); len(l) > 0 {
		st.ConfigPaths = l
	} else if v := os.Getenv("KUBE_CONFIG_PATHS"); v != "" {
		st.ConfigPaths = kubeconf.SplitPathList(v)
	}
	if len(st.ConfigPaths) > 0 {
		st.ConfigContext = strAttr(cfg, "config_context", "KUBE_CTX")
		st.ConfigContextAuthInfo = strAttr(cfg, "config_context_auth_info", "KUBE_CTX_AUTH_INFO")
		st.ConfigContextCluster = strAttr(cfg, "config_context_cluster", "KUBE_CTX_CLUSTER")
	}
	if v, ok := cfg["insecure"]; ok && !v.IsNull() && v.IsKnown() {
		_ = v.As(&st.Insecure)
	} else if e := os.Getenv("KUBE_INSECURE"); e != "" {
		st.Insecure, _ = strconv.ParseBool(e)
	}
	st.TLSServerName = strAttr(cfg, "tls_server_name", "KUBE_TLS_SERVER_NAME")
	st.ClusterCACertificate = strAttr(cfg, "cluster_ca_certificate", "KUBE_CLUSTER_CA_CERT_DATA")
	st.ClientCertificate = strAttr(cfg, "client_certificate", "KUBE_CLIENT_CERT_DATA")
	st.ClientKey = strAttr(cfg, "client_key", "KUBE_CLIENT_KEY_DATA")
	st.Host = strAttr(cfg, "host", "KUBE_HOST")
	st.Username = strAttr(cfg, "username", "KUBE_USER")
	st.Password = strAttr(cfg, "password", "KUBE_PASSWORD")
	st.Token = strAttr(cfg, "token", "KUBE_TOKEN")
	st.ProxyURL = strAttr(cfg, "proxy_url", "KUBE_PROXY_URL")
	if ev, ok := cfg["exec"]; ok && !ev.IsNull() && ev.IsKnown() {
		var blocks []tftypes.Value
		_ = ev.As(&blocks)
		if len(blocks) > 0 {
			var e map[string]tftypes.Value
			_ = blocks[0].As(&e)
			x := &kubeconf.Exec{APIVersion: strAttr(e, "api_version", ""), Command: strAttr(e, "command", ""), Args: strList(e["args"]), Env: map[string]string{}}
			if envv, ok := e["env"]; ok && !envv.IsNull() && envv.IsKnown() {
				var m map[string]tftypes.Value
				_ = envv.As(&m)
				for k, v := range m {
					var sv string
					_ = v.As(&sv)
					x.Env[k] = sv
				}
			}
			st.Exec = x
		}
	}
	rc, err := st.RESTConfig()
	if err != nil {
		s.configured = true
		if errors.Is(err, clientcmd.ErrEmptyConfig) {
			return resp, nil // as the real provider: no error now, every operation then fails for want of a client
		}
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Provider configuration: cannot load Kubernetes client config", err.Error()))
		return resp, nil
	}
	rc.UserAgent = standin.UserAgent("kubernetes", s.Version, req.TerraformVersion)
	codec := runtime.NoopEncoder{Decoder: scheme.Codecs.UniversalDecoder()}
	rc.NegotiatedSerializer = serializer.NegotiatedSerializerWrapper(runtime.SerializerInfo{Serializer: codec})
	s.config = rc
	s.configured = true
	return resp, nil
}

func (s *Server) canExecute() []*tfprotov5.Diagnostic {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.config == nil {
		return []*tfprotov5.Diagnostic{errDiag(nil, "Failed to construct REST client", "cannot create REST client: no client config")}
	}
	return nil
}

func (s *Server) dynamic() (dynamic.Interface, error) {
	s.dynOnce.Do(func() { s.dyn, s.dynErr = dynamic.NewForConfig(s.config) })
	return s.dyn, s.dynErr
}

func (s *Server) restMapper() (meta.RESTMapper, error) {
	s.mapperOnce.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(s.config)
		if err != nil {
			s.mapperErr = err
			return
		}
		s.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	})
	return s.mapper, s.mapperErr
}

func (s *Server) rest() (rest.Interface, error) {
	s.restOnce.Do(func() { s.restClient, s.restErr = rest.UnversionedRESTClientFor(s.config) })
	return s.restClient, s.restErr
}

// checkCredentials: GET /apis once, as the real provider does before planning.
func (s *Server) checkCredentials(ctx context.Context) []*tfprotov5.Diagnostic {
	s.credsOnce.Do(func() {
		rc, err := s.rest()
		if err != nil {
			s.credsDiags = []*tfprotov5.Diagnostic{errDiag(nil, "Failed to construct REST client", err.Error())}
			return
		}
		if err := rc.Get().AbsPath("/apis").Do(ctx).Error(); err != nil {
			if apierrors.IsUnauthorized(err) {
				s.credsDiags = []*tfprotov5.Diagnostic{errDiag(nil, "Invalid credentials", fmt.Sprintf("The credentials configured in the provider block are not accepted by the API server. Error: %s", err))}
			} else {
				s.credsDiags = []*tfprotov5.Diagnostic{errDiag(nil, "Invalid configuration for API client", err.Error())}
			}
		}
	})
	return s.credsDiags
}

func (s *Server) openAPI() (*openAPIv2, error) {
	s.oapiOnce.Do(func() {
		rc, err := s.rest()
		if err != nil {
			s.oapiErr = fmt.Errorf("failed get OpenAPI spec: %s", err)
			return
		}
		raw, err := rc.Verb("GET").Timeout(30*time.Second).AbsPath("openapi", "v2").SetHeader("Accept", "application/json").DoRaw(context.TODO())
		if err != nil {
			s.oapiErr = fmt.Errorf("failed get OpenAPI spec: %s", err)
			return
		}
		var doc map[string]interface{}
		if err := json.Unmarshal(raw, &doc); err != nil {
			s.oapiErr = fmt.Errorf("failed construct OpenAPI foundry: failed to parse spec: %s", err)
			return
		}
		s.oapi, s.oapiErr = newOpenAPIv2(doc)
		if s.oapiErr != nil {
			s.oapiErr = fmt.Errorf("failed construct OpenAPI foundry: %s", s.oapiErr)
		}
	})
	return s.oapi, s.oapiErr
}

func (s *Server) fetchCRDs(ctx context.Context) ([]unstructured.Unstructured, error) {
	s.crdsOnce.Do(func() {
		c, err := s.dynamic()
		if err != nil {
			s.crdsErr = err
			return
		}
		m, err := s.restMapper()
		if err != nil {
			s.crdsErr = err
			return
		}
		mappings, err := m.RESTMappings(schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"})
		if err != nil {
			s.crdsErr = fmt.Errorf("could not extract resource version mappings for apiextensions.k8s.io.CustomResourceDefinition: %s", err)
			return
		}
		for _, mp := range mappings {
			l, err := c.Resource(mp.Resource).List(ctx, metav1.ListOptions{})
			if err != nil {
				s.crdsErr = err
				return
			}
			s.crds = append(s.crds, l.Items...)
		}
	})
	return s.crds, s.crdsErr
}

func (s *Server) crdSchema(ctx context.Context, gvk schema.GroupVersionKind) (map[string]interface{}, bool, error) {
	crds, err := s.fetchCRDs(ctx)
	if err != nil {
		return nil, false, err
	}
	for _, crd := range crds {
		spec, _ := crd.Object["spec"].(map[string]interface{})
		if spec == nil || spec["group"] != gvk.Group {
			continue
		}
		names, _ := spec["names"].(map[string]interface{})
		if names == nil || names["kind"] != gvk.Kind {
			continue
		}
		versions, _ := spec["versions"].([]interface{})
		for _, rv := range versions {
			v, _ := rv.(map[string]interface{})
			if v == nil || v["name"] != gvk.Version {
				continue
			}
			sch, ok := v["schema"].(map[string]interface{})
			if !ok {
				return nil, true, nil // non-structural
			}
			o, _ := sch["openAPIV3Schema"].(map[string]interface{})
			return o, true, nil
		}
	}
	return nil, false, nil
}

// objectType: the resource's type from its CRD schema or the OpenAPI v2 document, status removed, apiVersion and
// kind backfilled and metadata always ObjectMeta's type.
func (s *Server) objectType(ctx context.Context, gvk schema.GroupVersionKind, status bool) (tftypes.Type, map[string]string, error) {
	oapi, err := s.openAPI()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot get OpenAPI foundry: %s", err)
	}
	var t tftypes.Type
	hints := map[string]string{}
	crd, found, err := s.crdSchema(ctx, gvk)
	if err != nil {
		return nil, hints, fmt.Errorf("failed to look up GVK [%s] among available CRDs: %s", gvk.String(), err)
	}
	if found && crd != nil {
		t, hints, err = typeFromCRDSchema(crd)
		if err != nil {
			return nil, hints, fmt.Errorf("failed to generate tftypes for GVK [%s] from CRD schema: %s", gvk.String(), err)
		}
	}
	if t == nil {
		t, hints, err = oapi.typeByGVK(gvk)
		if err != nil {
			return nil, hints, fmt.Errorf("cannot get resource type from OpenAPI (%s): %s", gvk.String(), err)
		}
	}
	if t.Is(tftypes.Object{}) && !status {
		atts := map[string]tftypes.Type{}
		for k, at := range t.(tftypes.Object).AttributeTypes {
			if k != "status" {
				atts[k] = at
			}
		}
		if _, ok := atts["apiVersion"]; !ok {
			atts["apiVersion"] = tftypes.String
		}
		if _, ok := atts["kind"]; !ok {
			atts["kind"] = tftypes.String
		}
		mt, err := oapi.typeByID(objectMetaDefinition, hints)
		if err != nil {
			return nil, hints, fmt.Errorf("failed to generate tftypes for v1.ObjectMeta: %s", err)
		}
		atts["metadata"] = mt
		t = tftypes.Object{AttributeTypes: atts}
	}
	return t, hints, nil
}

func stringOf(v tftypes.Value, key string) string {
	var m map[string]tftypes.Value
	if v.As(&m) != nil {
		return ""
	}
	var s string
	if mv, ok := m[key]; ok && mv.IsKnown() && !mv.IsNull() {
		_ = mv.As(&s)
	}
	return s
}

// gvkOf finds the exact GroupVersionKind of a manifest/object value among the REST mappings.
func gvkOf(v tftypes.Value, m meta.RESTMapper) (schema.GroupVersionKind, error) {
	apiVersion, kind := stringOf(v, "apiVersion"), stringOf(v, "kind")
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	mappings, err := m.RESTMappings(gv.WithKind(kind).GroupKind())
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	for _, mp := range mappings {
		if mp.GroupVersionKind.GroupVersion().String() == apiVersion {
			return mp.GroupVersionKind, nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("cannot select exact GV from REST mapper")
}

func isNamespaced(gvk schema.GroupVersionKind, m meta.RESTMapper) (bool, error) {
	rm, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return rm.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func gvrOf(u *unstructured.Unstructured, m meta.RESTMapper) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	mp, err := m.RESTMapping(gv.WithKind(u.GetKind()).GroupKind(), gv.Version)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return mp.Resource, nil
}
