package manifest

import (
	"math/big"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// a small OpenAPI v2 document: a kind with a map of quantities (int-or-string), a list of objects and ObjectMeta
var doc = map[string]interface{}{
	"definitions": map[string]interface{}{
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": map[string]interface{}{
			"type": "object",
			"properties": map[string]interface{}{
				"name":   map[string]interface{}{"type": "string"},
				"labels": map[string]interface{}{"type": "object", "additionalProperties": map[string]interface{}{"type": "string"}},
			},
		},
		"io.k8s.apimachinery.pkg.api.resource.Quantity": map[string]interface{}{"type": "string", "format": "int-or-string"},
		"test.v1.Thing": map[string]interface{}{
			"type":                            "object",
			"x-kubernetes-group-version-kind": []interface{}{map[string]interface{}{"group": "test", "version": "v1", "kind": "Thing"}},
			"properties": map[string]interface{}{
				"apiVersion": map[string]interface{}{"type": "string"},
				"kind":       map[string]interface{}{"type": "string"},
				"metadata":   map[string]interface{}{"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
				"spec": map[string]interface{}{"type": "object", "properties": map[string]interface{}{
					"hard":     map[string]interface{}{"type": "object", "additionalProperties": map[string]interface{}{"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
					"replicas": map[string]interface{}{"type": "integer"},
					"items":    map[string]interface{}{"type": "array", "items": map[string]interface{}{"type": "object", "properties": map[string]interface{}{"n": map[string]interface{}{"type": "string"}}}},
				}},
			},
		},
	},
}

func thingType(t *testing.T) (tftypes.Type, map[string]string) {
	o, err := newOpenAPIv2(doc)
	if err != nil {
		t.Fatal(err)
	}
	typ, hints, err := o.typeByGVK(schema.GroupVersionKind{Group: "test", Version: "v1", Kind: "Thing"})
	if err != nil {
		t.Fatal(err)
	}
	return typ, hints
}

func TestTypeFromOpenAPI(t *testing.T) {
	typ, hints := thingType(t)
	spec := typ.(tftypes.Object).AttributeTypes["spec"].(tftypes.Object)
	if !spec.AttributeTypes["hard"].Is(tftypes.Map{ElementType: tftypes.String}) {
		t.Errorf("quantities: %v", spec.AttributeTypes["hard"])
	}
	if !spec.AttributeTypes["replicas"].Is(tftypes.Number) || !spec.AttributeTypes["items"].Is(tftypes.List{}) {
		t.Errorf("spec: %v", spec)
	}
	if hints[tftypes.NewAttributePath().WithAttributeName("spec").WithAttributeName("hard").WithElementKeyString("#").String()] != intOrStringHint {
		t.Errorf("hints: %v", hints)
	}
}

// A manifest number for a quantity is planned as the string the schema asks for; unset attributes are unknown;
// the API's rewritten quantity then differs from the plan (Terraform reports an inconsistent result).
func TestPlanFromManifest(t *testing.T) {
	typ, hints := thingType(t)
	man := tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"apiVersion": tftypes.String, "kind": tftypes.String,
		"spec": tftypes.Object{AttributeTypes: map[string]tftypes.Type{"hard": tftypes.Object{AttributeTypes: map[string]tftypes.Type{"cpu": tftypes.Number}}}},
	}}, map[string]tftypes.Value{
		"apiVersion": tftypes.NewValue(tftypes.String, "test/v1"), "kind": tftypes.NewValue(tftypes.String, "Thing"),
		"spec": tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{"hard": tftypes.Object{AttributeTypes: map[string]tftypes.Type{"cpu": tftypes.Number}}}},
			map[string]tftypes.Value{"hard": tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{"cpu": tftypes.Number}},
				map[string]tftypes.Value{"cpu": tftypes.NewValue(tftypes.Number, big.NewFloat(1000))})}),
	})
	morphed, d := morphValue(man, typ, tftypes.NewAttributePath())
	if hasError(d) {
		t.Fatal(d[0].Detail)
	}
	planned, err := deepUnknown(typ, morphed, tftypes.NewAttributePath())
	if err != nil {
		t.Fatal(err)
	}
	cpu, ok := walk(planned, tftypes.NewAttributePath().WithAttributeName("spec").WithAttributeName("hard").WithElementKeyString("cpu"))
	if !ok || !cpu.Equal(tftypes.NewValue(tftypes.String, "1000")) {
		t.Fatalf("cpu planned as %v", cpu)
	}
	if rep, _ := walk(planned, tftypes.NewAttributePath().WithAttributeName("spec").WithAttributeName("replicas")); rep.IsKnown() {
		t.Errorf("unset replicas should be unknown, is %v", rep)
	}
	// the payload sends the int-or-string as an integer
	pu, err := fromTFValue(unknownToNull(planned), hints, tftypes.NewAttributePath())
	if err != nil {
		t.Fatal(err)
	}
	if got := pu.(map[string]interface{})["spec"].(map[string]interface{})["hard"].(map[string]interface{})["cpu"]; got != 1000 {
		t.Errorf("payload cpu %#v", got)
	}
	// the API answers 1k
	api := map[string]interface{}{"apiVersion": "test/v1", "kind": "Thing", "metadata": map[string]interface{}{"name": "x"},
		"spec": map[string]interface{}{"hard": map[string]interface{}{"cpu": "1k"}, "replicas": int64(1)}}
	obj, err := toTFValue(api, typ, hints, tftypes.NewAttributePath())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := walk(obj, tftypes.NewAttributePath().WithAttributeName("spec").WithAttributeName("hard").WithElementKeyString("cpu"))
	if got.Equal(cpu) {
		t.Errorf("the rewritten quantity should differ from the plan")
	}
}

func TestFieldPath(t *testing.T) {
	p, err := fieldPath(`metadata.annotations["example.com/x"]`)
	if err != nil {
		t.Fatal(err)
	}
	want := tftypes.NewAttributePath().WithAttributeName("metadata").WithAttributeName("annotations").WithElementKeyString("example.com/x")
	if !p.Equal(want) {
		t.Errorf("%v", p)
	}
	if p, err = fieldPath("spec.items[2].n"); err != nil || !p.Equal(tftypes.NewAttributePath().WithAttributeName("spec").WithAttributeName("items").WithElementKeyInt(2).WithAttributeName("n")) {
		t.Errorf("%v %v", p, err)
	}
	if _, err := fieldPath("spec[*]"); err == nil {
		t.Error("splat accepted")
	}
}
