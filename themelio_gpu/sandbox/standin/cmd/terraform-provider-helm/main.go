// Command terraform-provider-helm is the themelio sandbox's STAND-IN for hashicorp/helm 3.1.1: the real provider's
// module is not served by the Go module proxy here. It serves helm_release with the real provider's schema,
// through the Helm SDK (docs/sandbox.md lists where it differs). It is not HashiCorp's build.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
	"k8s.io/klog/v2"

	"themelio.local/sandbox-standin/internal/helmprovider"
	"themelio.local/sandbox-standin/internal/standin"
)

var version = "dev"

func main() {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	debug := standin.Start("helm", version)
	var opts []tf6server.ServeOpt
	if debug {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	server := providerserver.NewProtocol6(helmprovider.New(version)())
	if err := tf6server.Serve(standin.ServerName("helm"), func() tfprotov6.ProviderServer { return server() }, opts...); err != nil {
		log.Printf("[ERROR] %v", err)
		os.Exit(1)
	}
}
