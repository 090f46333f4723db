// Package manifest is the stand-in's kubernetes_manifest (hashicorp/kubernetes 2.38.0 behaviour): the object's
// type is built from the cluster's OpenAPI v2 document (or the CRD's openAPIV3Schema), the manifest is morphed
// into it and planned with every unset attribute unknown, applied by server-side apply, and the API server's
// answer becomes `object`.
package manifest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	intOrStringHint      = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
	preserveUnknownHint  = "x-kubernetes-preserve-unknown-fields"
	objectMetaDefinition = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	recursionDepth       = 50
)

// typeBuilder turns JSON-schema documents (as decoded JSON) into tftypes, resolving $ref in defs.
type typeBuilder struct {
	defs  map[string]interface{}
	hints map[string]string
}

func (b *typeBuilder) resolve(s map[string]interface{}) (map[string]interface{}, error) {
	for depth := 0; depth < recursionDepth; depth++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s, nil
		}
		parts := strings.Split(ref, "/")
		id := parts[len(parts)-1]
		switch id {
		case "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
			"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1beta1.JSONSchemaProps":
			return map[string]interface{}{}, nil // recursive: left dynamic
		}
		next, ok := b.defs[id].(map[string]interface{})
		if !ok {
			return nil, errors.New("schema not found")
		}
		s = next
	}
	return nil, errors.New("reference chain too long")
}

func boolExt(s map[string]interface{}, key string) bool {
	v, ok := s[key].(bool)
	return ok && v
}

func isFullyKnownType(t tftypes.Type) bool {
	switch {
	case t.Is(tftypes.DynamicPseudoType):
		return false
	case t.Is(tftypes.Object{}):
		for _, a := range t.(tftypes.Object).AttributeTypes {
			if !isFullyKnownType(a) {
				return false
			}
		}
	case t.Is(tftypes.Tuple{}):
		for _, e := range t.(tftypes.Tuple).ElementTypes {
			if !isFullyKnownType(e) {
				return false
			}
		}
	case t.Is(tftypes.List{}):
		return isFullyKnownType(t.(tftypes.List).ElementType)
	case t.Is(tftypes.Set{}):
		return isFullyKnownType(t.(tftypes.Set).ElementType)
	case t.Is(tftypes.Map{}):
		return isFullyKnownType(t.(tftypes.Map).ElementType)
	}
	return true
}

// typeOf maps one schema to a type: string/int-or-string -> String, boolean -> Bool, number/integer -> Number,
// array -> List (Tuple of one when its element type holds a dynamic part), object with properties -> Object,
// object with additionalProperties -> Map, object with neither and untyped schemas -> DynamicPseudoType.
func (b *typeBuilder) typeOf(s map[string]interface{}, depth int, ap *tftypes.AttributePath) (tftypes.Type, error) {
	if depth == 0 {
		return nil, errors.New("recursion runaway while generating type from OpenAPI spec")
	}
	if s == nil {
		return nil, errors.New("cannot convert OpenAPI type (nil)")
	}
	if boolExt(s, "x-kubernetes-preserve-unknown-fields") {
		b.hints[ap.String()] = preserveUnknownHint
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "string":
		if f, _ := s["format"].(string); f == "int-or-string" {
			b.hints[ap.String()] = intOrStringHint
		}
		return tftypes.String, nil
	case "boolean":
		return tftypes.Bool, nil
	case "number", "integer":
		return tftypes.Number, nil
	case "":
		if boolExt(s, "x-kubernetes-int-or-string") {
			b.hints[ap.String()] = intOrStringHint
			return tftypes.String, nil
		}
		return tftypes.DynamicPseudoType, nil
	case "array":
		items, hasItems := s["items"].(map[string]interface{})
		addl, hasAddl := s["additionalProperties"].(map[string]interface{})
		switch {
		case hasItems && !hasAddl:
			it, err := b.resolve(items)
			if err != nil {
				return nil, fmt.Errorf("failed to resolve schema for items: %s", err)
			}
			et, err := b.typeOf(it, depth-1, ap.WithElementKeyInt(-1))
			if err != nil {
				return nil, err
			}
			if !isFullyKnownType(et) {
				return tftypes.Tuple{ElementTypes: []tftypes.Type{et}}, nil
			}
			return tftypes.List{ElementType: et}, nil
		case hasAddl && !hasItems:
			it, err := b.resolve(addl)
			if err != nil {
				return nil, fmt.Errorf("failed to resolve schema for items: %s", err)
			}
			et, err := b.typeOf(it, depth-1, ap.WithElementKeyInt(-1))
			if err != nil {
				return nil, err
			}
			return tftypes.Tuple{ElementTypes: []tftypes.Type{et}}, nil
		}
	case "object":
		props, hasProps := s["properties"].(map[string]interface{})
		addl, hasAddl := s["additionalProperties"].(map[string]interface{})
		switch {
		case hasProps && !hasAddl:
			atts := make(map[string]tftypes.Type, len(props))
			for name, raw := range props {
				ps, _ := raw.(map[string]interface{})
				rs, err := b.resolve(ps)
				if err != nil {
					return nil, fmt.Errorf("failed to resolve schema: %s", err)
				}
				t, err := b.typeOf(rs, depth-1, ap.WithAttributeName(name))
				if err != nil {
					return nil, err
				}
				atts[name] = t
			}
			return tftypes.Object{AttributeTypes: atts}, nil
		case hasAddl && !hasProps:
			rs, err := b.resolve(addl)
			if err != nil {
				return nil, fmt.Errorf("failed to resolve schema: %s", err)
			}
			et, err := b.typeOf(rs, depth-1, ap.WithElementKeyString("#"))
			if err != nil {
				return nil, err
			}
			return tftypes.Map{ElementType: et}, nil
		case !hasProps && !hasAddl:
			return tftypes.DynamicPseudoType, nil
		}
	}
	return nil, fmt.Errorf("unknown type: %s", typ)
}

// openAPIv2 indexes an OpenAPI v2 document's definitions by GroupVersionKind.
type openAPIv2 struct {
	defs  map[string]interface{}
	index map[schema.GroupVersionKind]string
}

func newOpenAPIv2(doc map[string]interface{}) (*openAPIv2, error) {
	defs, _ := doc["definitions"].(map[string]interface{})
	if len(defs) == 0 {
		return nil, errors.New("spec has no type information")
	}
	o := &openAPIv2{defs: defs, index: map[schema.GroupVersionKind]string{}}
	for id, raw := range defs {
		d, _ := raw.(map[string]interface{})
		gvks, _ := d["x-kubernetes-group-version-kind"].([]interface{})
		for _, g := range gvks {
			gm, _ := g.(map[string]interface{})
			gr, _ := gm["group"].(string)
			v, _ := gm["version"].(string)
			k, _ := gm["kind"].(string)
			o.index[schema.GroupVersionKind{Group: gr, Version: v, Kind: k}] = id
		}
	}
	return o, nil
}

func (o *openAPIv2) typeByID(id string, hints map[string]string) (tftypes.Type, error) {
	d, ok := o.defs[id].(map[string]interface{})
	if !ok {
		return nil, errors.New("invalid type identifier")
	}
	b := &typeBuilder{defs: o.defs, hints: hints}
	s, err := b.resolve(d)
	if err != nil {
		return nil, fmt.Errorf("failed to resolve schema: %s", err)
	}
	return b.typeOf(s, recursionDepth, tftypes.NewAttributePath())
}

func (o *openAPIv2) typeByGVK(gvk schema.GroupVersionKind) (tftypes.Type, map[string]string, error) {
	hints := map[string]string{}
	id, ok := o.index[gvk]
	if !ok {
		return nil, hints, fmt.Errorf("%v resource not found in OpenAPI index", gvk)
	}
	t, err := o.typeByID(id, hints)
	return t, hints, err
}

// typeFromCRDSchema builds the type of a custom resource from its openAPIV3Schema.
func typeFromCRDSchema(s map[string]interface{}) (tftypes.Type, map[string]string, error) {
	hints := map[string]string{}
	b := &typeBuilder{defs: map[string]interface{}{}, hints: hints}
	t, err := b.typeOf(s, recursionDepth, tftypes.NewAttributePath())
	return t, hints, err
}
