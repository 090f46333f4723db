package manifest

import (
	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

const typeName_ = "kubernetes_manifest"

func attr(name string, t tftypes.Type, required, optional, computed bool, desc string) *tfprotov5.SchemaAttribute {
	return &tfprotov5.SchemaAttribute{Name: name, Type: t, Required: required, Optional: optional, Computed: computed, Description: desc}
}

// resourceSchema is kubernetes_manifest's schema in hashicorp/kubernetes 2.38.0 (version 1).
func resourceSchema() *tfprotov5.Schema {
	return &tfprotov5.Schema{
		Version: 1,
		Block: &tfprotov5.SchemaBlock{
			BlockTypes: []*tfprotov5.SchemaNestedBlock{
				{TypeName: "timeouts", Nesting: tfprotov5.SchemaNestedBlockNestingModeList, MaxItems: 1,
					Block: &tfprotov5.SchemaBlock{Attributes: []*tfprotov5.SchemaAttribute{
						attr("create", tftypes.String, false, true, false, "Timeout for the create operation."),
						attr("update", tftypes.String, false, true, false, "Timeout for the update operation."),
						attr("delete", tftypes.String, false, true, false, "Timeout for the delete operation."),
					}}},
				{TypeName: "field_manager", Nesting: tfprotov5.SchemaNestedBlockNestingModeList, MaxItems: 1,
					Block: &tfprotov5.SchemaBlock{Attributes: []*tfprotov5.SchemaAttribute{
						attr("name", tftypes.String, false, true, false, "The name to use for the field manager when creating and updating the resource."),
						attr("force_conflicts", tftypes.Bool, false, true, false, "Force changes against conflicts."),
					}}},
				{TypeName: "wait", Nesting: tfprotov5.SchemaNestedBlockNestingModeList, MaxItems: 1,
					Block: &tfprotov5.SchemaBlock{
						BlockTypes: []*tfprotov5.SchemaNestedBlock{
							{TypeName: "condition", Nesting: tfprotov5.SchemaNestedBlockNestingModeList,
								Block: &tfprotov5.SchemaBlock{Attributes: []*tfprotov5.SchemaAttribute{
									attr("status", tftypes.String, false, true, false, "The condition status."),
									attr("type", tftypes.String, false, true, false, "The type of condition."),
								}}},
						},
						Attributes: []*tfprotov5.SchemaAttribute{
							attr("rollout", tftypes.Bool, false, true, false, "Wait for rollout to complete on resources that support `kubectl rollout status`."),
							attr("fields", tftypes.Map{ElementType: tftypes.String}, false, true, false, "A map of paths to fields to wait for a specific field value."),
						},
					}},
			},
			Attributes: []*tfprotov5.SchemaAttribute{
				attr("manifest", tftypes.DynamicPseudoType, true, false, false, "A Kubernetes manifest describing the desired state of the resource in HCL format."),
				attr("object", tftypes.DynamicPseudoType, false, true, true, "The resulting resource state, as returned by the API server after applying the desired state from `manifest`."),
				{Name: "wait_for", Type: tftypes.Object{AttributeTypes: map[string]tftypes.Type{"fields": tftypes.Map{ElementType: tftypes.String}}},
					Optional: true, Deprecated: true, Description: "A map of attribute paths and desired patterns to be matched. After each apply the provider will wait for all attributes listed here to reach a value that matches the desired pattern."},
				attr("computed_fields", tftypes.List{ElementType: tftypes.String}, false, true, false, "List of manifest fields whose values can be altered by the API server during 'apply'. Defaults to: [\"metadata.annotations\", \"metadata.labels\"]"),
			},
		},
	}
}

// objectTypeOf is the tftypes.Object of a schema's block (blocks as lists of objects).
func objectTypeOf(b *tfprotov5.SchemaBlock) tftypes.Object {
	atts := map[string]tftypes.Type{}
	for _, a := range b.Attributes {
		atts[a.Name] = a.Type
	}
	for _, nb := range b.BlockTypes {
		atts[nb.TypeName] = tftypes.List{ElementType: objectTypeOf(nb.Block)}
	}
	return tftypes.Object{AttributeTypes: atts}
}

var resourceType = objectTypeOf(resourceSchema().Block)
