// Package standin holds what every stand-in binary says about itself: that it is this project's stand-in for a
// HashiCorp provider (built from Go modules the module proxy serves), not HashiCorp's build.
package standin

import (
	"flag"
	"fmt"
	"log"
	"os"
)

// Notice is written to stderr (which Terraform logs) when a stand-in starts, and printed by -version.
func Notice(provider, version string) string {
	return fmt.Sprintf("terraform-provider-%s %s: THEMELIO SANDBOX STAND-IN for hashicorp/%s, written by this project "+
		"(themelio_gpu/sandbox/standin); not HashiCorp's build and not its code", provider, version, provider)
}

// ServerName is the name the plugin server is started under (it appears in Terraform's provider logs).
func ServerName(provider string) string {
	return "registry.terraform.io/hashicorp/" + provider + " (themelio sandbox stand-in, not HashiCorp's build)"
}

// Start parses the flags every stand-in takes (-version, -debug) and logs the stand-in notice. It returns the
// value of -debug. With -version it prints the notice and exits.
func Start(provider, version string) bool {
	showVersion := flag.Bool("version", false, "print the stand-in's version and exit")
	debug := flag.Bool("debug", false, "start the provider in stand-alone debug mode")
	flag.Parse()
	if *showVersion {
		fmt.Println(Notice(provider, version))
		os.Exit(0)
	}
	log.SetFlags(0)
	log.Printf("[INFO] %s", Notice(provider, version))
	return *debug
}

// UserAgent is the User-Agent the stand-in's Kubernetes clients send.
func UserAgent(provider, version, terraformVersion string) string {
	return fmt.Sprintf("themelio-standin-%s/%s Terraform/%s", provider, version, terraformVersion)
}
