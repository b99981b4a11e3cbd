// Command pulumi-resource-kubernetes is the Pulumi Kubernetes provider plugin,
// built from github.com/pulumi/pulumi-kubernetes/provider/v4 (v4.25.0).
//
// Why an own main: upstream's main package embeds schema-embed.json and
// terraform-mapping-embed.json, which its Makefile generates (`go generate`)
// and .gitignore excludes, so they are missing from the module zip and the
// upstream package cannot be built from the module cache. tools/build
// (prepare_pulumi_k8s) writes the same two files next to this one from the
// committed schema.json / terraform-mapping.json in the module cache, with
// "version" set in the schema as upstream's generate.go does.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	// version.Version is stamped by tools/build (-X …/pkg/version.Version).
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
