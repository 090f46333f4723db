// Package kubeconf turns a provider block's connection settings into a client-go configuration, the way the
// kubernetes and helm providers do it: kubeconfig files (config_path / config_paths) with context overrides,
// then the static settings (host, certificates, token, exec, proxy) laid over them as clientcmd overrides.
package kubeconf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	// auth plugins (oidc, exec) as the real providers load them
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

// Exec is the exec credential plugin block.
type Exec struct {
	APIVersion string
	Command    string
	Args       []string
	Env        map[string]string
}

// Settings are the connection settings of a provider block (after environment defaults were applied).
type Settings struct {
	Host                  string
	Username              string
	Password              string
	Insecure              bool
	TLSServerName         string
	ClientCertificate     string
	ClientKey             string
	ClusterCACertificate  string
	ConfigPaths           []string
	ConfigContext         string
	ConfigContextAuthInfo string
	ConfigContextCluster  string
	Token                 string
	ProxyURL              string
	Exec                  *Exec
	// Namespace, when set, overrides the context's namespace (the helm provider sets the release's).
	Namespace string
	// HelmHostTLS: the helm provider defaults host to https when a CA, a client certificate or insecure is set;
	// the kubernetes provider only when a CA or a client certificate is set and insecure is not.
	HelmHostTLS bool
}

// ExpandHome expands a leading ~ as go-homedir does.
func ExpandHome(p string) (string, error) {
	if p == "" || p[0] != '~' {
		return p, nil
	}
	if len(p) > 1 && p[1] != '/' && p[1] != '\\' {
		return "", fmt.Errorf("cannot expand user-specific home dir")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, p[1:]), nil
}

// ClientConfig builds the deferred-loading clientcmd configuration.
func (s Settings) ClientConfig() (clientcmd.ClientConfig, error) {
	overrides := &clientcmd.ConfigOverrides{}
	loader := &clientcmd.ClientConfigLoadingRules{}
	if len(s.ConfigPaths) > 0 {
		expanded := make([]string, 0, len(s.ConfigPaths))
		for _, p := range s.ConfigPaths {
			e, err := ExpandHome(p)
			if err != nil {
				return nil, err
			}
			expanded = append(expanded, e)
		}
		if len(expanded) == 1 {
			loader.ExplicitPath = expanded[0]
		} else {
			loader.Precedence = expanded
		}
		if s.ConfigContext != "" {
			overrides.CurrentContext = s.ConfigContext
		}
		overrides.Context = clientcmdapi.Context{}
		if s.ConfigContextAuthInfo != "" {
			overrides.Context.AuthInfo = s.ConfigContextAuthInfo
		}
		if s.ConfigContextCluster != "" {
			overrides.Context.Cluster = s.ConfigContextCluster
		}
	}
	if s.Insecure {
		overrides.ClusterInfo.InsecureSkipTLSVerify = true
	}
	if s.TLSServerName != "" {
		overrides.ClusterInfo.TLSServerName = s.TLSServerName
	}
	if s.ClusterCACertificate != "" {
		overrides.ClusterInfo.CertificateAuthorityData = []byte(s.ClusterCACertificate)
	}
	if s.ClientCertificate != "" {
		overrides.AuthInfo.ClientCertificateData = []byte(s.ClientCertificate)
	}
	if s.Host != "" {
		hasCA := len(overrides.ClusterInfo.CertificateAuthorityData) != 0
		hasCert := len(overrides.AuthInfo.ClientCertificateData) != 0
		defaultTLS := (hasCA || hasCert) && !overrides.ClusterInfo.InsecureSkipTLSVerify
		if s.HelmHostTLS {
			defaultTLS = hasCA || hasCert || overrides.ClusterInfo.InsecureSkipTLSVerify
		}
		host, _, err := rest.DefaultServerURL(s.Host, "", schema.GroupVersion{}, defaultTLS)
		if err != nil {
			return nil, fmt.Errorf("failed to parse value for host: %s: %w", s.Host, err)
		}
		overrides.ClusterInfo.Server = host.String()
	}
	if s.Username != "" {
		overrides.AuthInfo.Username = s.Username
	}
	if s.Password != "" {
		overrides.AuthInfo.Password = s.Password
	}
	if s.ClientKey != "" {
		overrides.AuthInfo.ClientKeyData = []byte(s.ClientKey)
	}
	if s.Token != "" {
		overrides.AuthInfo.Token = s.Token
	}
	if s.Exec != nil && s.Exec.APIVersion != "" && s.Exec.Command != "" {
		e := &clientcmdapi.ExecConfig{
			APIVersion:      s.Exec.APIVersion,
			Command:         s.Exec.Command,
			Args:            s.Exec.Args,
			InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
		}
		for k, v := range s.Exec.Env {
			e.Env = append(e.Env, clientcmdapi.ExecEnvVar{Name: k, Value: v})
		}
		overrides.AuthInfo.Exec = e
	}
	if s.ProxyURL != "" {
		overrides.ClusterDefaults.ProxyURL = s.ProxyURL
	}
	if s.Namespace != "" {
		overrides.Context.Namespace = s.Namespace
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loader, overrides), nil
}

// RESTConfig returns the REST configuration.
func (s Settings) RESTConfig() (*rest.Config, error) {
	cc, err := s.ClientConfig()
	if err != nil {
		return nil, err
	}
	return cc.ClientConfig()
}

// SplitPathList splits KUBE_CONFIG_PATHS.
func SplitPathList(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	return filepath.SplitList(v)
}
