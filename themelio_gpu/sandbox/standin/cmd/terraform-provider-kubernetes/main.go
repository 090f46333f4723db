// Command terraform-provider-kubernetes is the themelio sandbox's STAND-IN for hashicorp/kubernetes 2.38.0: the
// real provider's module is not served by the Go module proxy here. It serves the resources the stacks use with
// the real provider's schemas and behaviour (docs/sandbox.md lists where it differs). It is not HashiCorp's build.
package main

import (
	"context"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tfprotov5/tf5server"
	"github.com/hashicorp/terraform-plugin-mux/tf5muxserver"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"

	"themelio.local/sandbox-standin/internal/k8sprovider"
	"themelio.local/sandbox-standin/internal/manifest"
	"themelio.local/sandbox-standin/internal/standin"
)

var version = "dev"

func main() {
	debug := standin.Start("kubernetes", version)
	ctx := context.Background()
	k8sprovider.Version = version
	sdk := k8sprovider.Provider()
	sdkServer := schema.NewGRPCProviderServer(sdk)
	ps, err := sdkServer.GetProviderSchema(ctx, &tfprotov5.GetProviderSchemaRequest{})
	if err != nil || ps.Provider == nil {
		log.Printf("[ERROR] provider schema: %v", err)
		os.Exit(1)
	}
	man := &manifest.Server{ProviderConfigType: ps.Provider.ValueType(), Version: version}
	mux, err := tf5muxserver.NewMuxServer(ctx,
		func() tfprotov5.ProviderServer { return sdkServer },
		func() tfprotov5.ProviderServer { return man },
	)
	if err != nil {
		log.Printf("[ERROR] %v", err)
		os.Exit(1)
	}
	var opts []tf5server.ServeOpt
	if debug {
		opts = append(opts, tf5server.WithManagedDebug())
	}
	if err := tf5server.Serve(standin.ServerName("kubernetes"), mux.ProviderServer, opts...); err != nil {
		log.Printf("[ERROR] %v", err)
		os.Exit(1)
	}
}
