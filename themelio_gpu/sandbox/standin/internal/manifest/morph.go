package manifest

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func errDiag(p *tftypes.AttributePath, summary, detail string) *tfprotov5.Diagnostic {
	return &tfprotov5.Diagnostic{Severity: tfprotov5.DiagnosticSeverityError, Summary: summary, Detail: detail, Attribute: p}
}

func hasError(ds []*tfprotov5.Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == tfprotov5.DiagnosticSeverityError {
			return true
		}
	}
	return false
}

func typeName(t tftypes.Type) string { return strings.ReplaceAll(t.String(), "tftypes.", "") }

func pathSummary(p *tftypes.AttributePath) string {
	var b strings.Builder
	for i, s := range p.Steps() {
		switch v := s.(type) {
		case tftypes.AttributeName:
			if i != 0 {
				b.WriteString(".")
			}
			b.WriteString(string(v))
		case tftypes.ElementKeyString:
			b.WriteString("[" + string(v) + "]")
		case tftypes.ElementKeyInt:
			b.WriteString("[" + strconv.FormatInt(int64(v), 10) + "]")
		}
	}
	return b.String()
}

func newValue(t tftypes.Type, val interface{}, p *tftypes.AttributePath) (tftypes.Value, []*tfprotov5.Diagnostic) {
	if err := tftypes.ValidateValue(t, val); err != nil {
		return tftypes.Value{}, []*tfprotov5.Diagnostic{errDiag(p, "Provider encountered an error when trying to determine the Terraform type information for the configured manifest", err.Error())}
	}
	return tftypes.NewValue(t, val), nil
}

func incompatible(v tftypes.Value, t tftypes.Type, p *tftypes.AttributePath) []*tfprotov5.Diagnostic {
	return []*tfprotov5.Diagnostic{errDiag(p, "Value incompatible with expected type",
		fmt.Sprintf("Attribute: %s\n... of type:\n%+v\n...cannot be converted to type:\n%s", pathSummary(p), typeName(v.Type()), typeName(t)))}
}

// morphValue converts a value from the configuration into the type the OpenAPI schema gives: numbers and booleans
// to strings where a string is expected (and strings back), tuples and lists into lists, objects into maps or
// into objects that carry every attribute of the type (null where unset). Attributes the type lacks are dropped.
func morphValue(v tftypes.Value, t tftypes.Type, p *tftypes.AttributePath) (tftypes.Value, []*tfprotov5.Diagnostic) {
	if t == nil {
		return tftypes.Value{}, []*tfprotov5.Diagnostic{errDiag(p, "Invalid reference type for attribute", fmt.Sprintf("Cannot convert value into 'nil' type at attribute: %s", pathSummary(p)))}
	}
	if v.IsNull() {
		return newValue(t, nil, p)
	}
	if t.Is(tftypes.DynamicPseudoType) {
		return v, nil
	}
	if !v.IsKnown() {
		return v, []*tfprotov5.Diagnostic{{Severity: tfprotov5.DiagnosticSeverityWarning, Attribute: p, Summary: "Value that isn't fully known",
			Detail: fmt.Sprintf("Type conversion cannot be performed on (partially) unknown value at attribute: %s", pathSummary(p))}}
	}
	vt := v.Type()
	switch {
	case vt.Is(tftypes.String):
		var s string
		_ = v.As(&s)
		switch {
		case t.Is(tftypes.String):
			return v, nil
		case t.Is(tftypes.Number):
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return tftypes.Value{}, []*tfprotov5.Diagnostic{errDiag(p, "String value doesn't parse as Number", fmt.Sprintf("Error: %s\n...at attribute:\n%s", err, pathSummary(p)))}
			}
			return newValue(t, new(big.Float).SetFloat64(f), p)
		case t.Is(tftypes.Bool):
			bv, err := strconv.ParseBool(s)
			if err != nil {
				return tftypes.Value{}, []*tfprotov5.Diagnostic{errDiag(p, "String value doesn't parse as Boolean", fmt.Sprintf("Error: %s\n...at attribute:\n%s", err, pathSummary(p)))}
			}
			return newValue(t, bv, p)
		}
	case vt.Is(tftypes.Number):
		if t.Is(tftypes.Number) {
			return v, nil
		}
		if t.Is(tftypes.String) {
			var f big.Float
			_ = v.As(&f)
			return newValue(t, f.String(), p)
		}
	case vt.Is(tftypes.Bool):
		if t.Is(tftypes.Bool) {
			return v, nil
		}
		if t.Is(tftypes.String) {
			var bv bool
			_ = v.As(&bv)
			return newValue(t, strconv.FormatBool(bv), p)
		}
	case vt.Is(tftypes.List{}), vt.Is(tftypes.Set{}), vt.Is(tftypes.Tuple{}):
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return tftypes.Value{}, []*tfprotov5.Diagnostic{errDiag(p, "Failed to extract value of collection attribute", err.Error())}
		}
		return morphElements(v, elems, t, p)
	case vt.Is(tftypes.Map{}), vt.Is(tftypes.Object{}):
		var vals map[string]tftypes.Value
		if err := v.As(&vals); err != nil {
			return tftypes.Value{}, []*tfprotov5.Diagnostic{errDiag(p, "Failed to extract value of attribute", err.Error())}
		}
		isObject := vt.Is(tftypes.Object{})
		switch {
		case t.Is(tftypes.Object{}):
			atts := t.(tftypes.Object).AttributeTypes
			out := make(map[string]tftypes.Value, len(atts))
			for k, ev := range vals {
				at, ok := atts[k]
				if !ok {
					continue
				}
				ep := p.WithElementKeyString(k)
				if isObject {
					ep = p.WithAttributeName(k)
				}
				nv, d := morphValue(ev, at, ep)
				if hasError(d) {
					return tftypes.Value{}, d
				}
				out[k] = nv
			}
			if !isObject {
				return newValue(t, out, p)
			}
			for k, at := range atts {
				if _, ok := out[k]; !ok {
					nv, d := newValue(at, nil, p)
					if d != nil {
						return tftypes.Value{}, d
					}
					out[k] = nv
				}
			}
			types := make(map[string]tftypes.Type, len(out))
			for k, ov := range out {
				types[k] = ov.Type()
			}
			return tftypes.NewValue(tftypes.Object{AttributeTypes: types}, out), nil
		case t.Is(tftypes.Map{}):
			et := t.(tftypes.Map).ElementType
			out := make(map[string]tftypes.Value, len(vals))
			for k, ev := range vals {
				nv, d := morphValue(ev, et, p.WithElementKeyString(k))
				if hasError(d) {
					return tftypes.Value{}, d
				}
				out[k] = nv
			}
			return newValue(t, out, p)
		}
	}
	return tftypes.Value{}, incompatible(v, t, p)
}

func morphElements(v tftypes.Value, elems []tftypes.Value, t tftypes.Type, p *tftypes.AttributePath) (tftypes.Value, []*tfprotov5.Diagnostic) {
	var elemType func(i int) tftypes.Type
	switch {
	case t.Is(tftypes.List{}):
		et := t.(tftypes.List).ElementType
		elemType = func(int) tftypes.Type { return et }
	case t.Is(tftypes.Set{}):
		et := t.(tftypes.Set).ElementType
		elemType = func(int) tftypes.Type { return et }
	case t.Is(tftypes.Tuple{}):
		ets := t.(tftypes.Tuple).ElementTypes
		if len(ets) != len(elems) {
			if len(ets) != 1 || !v.Type().Is(tftypes.Tuple{}) {
				return tftypes.Value{}, []*tfprotov5.Diagnostic{errDiag(p, "Failed to transform value into Tuple of different length", fmt.Sprintf("Error at attribute:\n%s", pathSummary(p)))}
			}
			// non-uniform lists of OpenAPI: every element takes the one element type
			elemType = func(int) tftypes.Type { return ets[0] }
		} else {
			elemType = func(i int) tftypes.Type { return ets[i] }
		}
	default:
		return tftypes.Value{}, incompatible(v, t, p)
	}
	out := make([]tftypes.Value, len(elems))
	for i, e := range elems {
		nv, d := morphValue(e, elemType(i), p.WithElementKeyInt(i))
		if hasError(d) {
			return tftypes.Value{}, d
		}
		out[i] = nv
	}
	if t.Is(tftypes.Tuple{}) {
		ts := make([]tftypes.Type, len(out))
		for i := range out {
			ts[i] = out[i].Type()
		}
		return tftypes.NewValue(tftypes.Tuple{ElementTypes: ts}, out), nil
	}
	return newValue(t, out, p)
}

// deepUnknown fills every attribute of t that v leaves null with an unknown value (collections: unknown as a
// whole), so the API server may set it; known values stay.
func deepUnknown(t tftypes.Type, v tftypes.Value, p *tftypes.AttributePath) (tftypes.Value, error) {
	if t == nil {
		return tftypes.Value{}, fmt.Errorf("type cannot be nil")
	}
	if !v.IsKnown() {
		return tftypes.NewValue(t, tftypes.UnknownValue), nil
	}
	switch {
	case t.Is(tftypes.Object{}):
		atts := t.(tftypes.Object).AttributeTypes
		var vals map[string]tftypes.Value
		if err := v.As(&vals); err != nil {
			return tftypes.Value{}, p.NewError(err)
		}
		out := make(map[string]tftypes.Value, len(atts))
		types := make(map[string]tftypes.Type, len(atts))
		for name, at := range atts {
			ev, ok := vals[name]
			if !ok {
				ev = tftypes.NewValue(at, nil)
			}
			nv, err := deepUnknown(at, ev, p.WithAttributeName(name))
			if err != nil {
				return tftypes.Value{}, err
			}
			out[name] = nv
			types[name] = nv.Type()
		}
		return tftypes.NewValue(tftypes.Object{AttributeTypes: types}, out), nil
	case t.Is(tftypes.Map{}):
		if v.IsNull() {
			return tftypes.NewValue(t, tftypes.UnknownValue), nil
		}
		var vals map[string]tftypes.Value
		if err := v.As(&vals); err != nil {
			return tftypes.Value{}, p.NewError(err)
		}
		for k, ev := range vals {
			nv, err := deepUnknown(t.(tftypes.Map).ElementType, ev, p.WithElementKeyString(k))
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[k] = nv
		}
		return tftypes.NewValue(t, vals), nil
	case t.Is(tftypes.Tuple{}):
		if v.IsNull() {
			return tftypes.NewValue(t, tftypes.UnknownValue), nil
		}
		ets := t.(tftypes.Tuple).ElementTypes
		vts := v.Type().(tftypes.Tuple).ElementTypes
		if len(vts) != len(ets) {
			if len(ets) != 1 {
				return tftypes.Value{}, p.NewErrorf("[%s] incompatible tuple types", p.String())
			}
			ets = append([]tftypes.Type{}, vts...)
		}
		var vals []tftypes.Value
		if err := v.As(&vals); err != nil {
			return tftypes.Value{}, p.NewError(err)
		}
		for i, et := range ets {
			nv, err := deepUnknown(et, vals[i], p.WithElementKeyInt(i))
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[i] = nv
		}
		return tftypes.NewValue(tftypes.Tuple{ElementTypes: ets}, vals), nil
	case t.Is(tftypes.List{}), t.Is(tftypes.Set{}):
		if v.IsNull() {
			return tftypes.NewValue(t, tftypes.UnknownValue), nil
		}
		var vals []tftypes.Value
		if err := v.As(&vals); err != nil {
			return tftypes.Value{}, p.NewError(err)
		}
		var et tftypes.Type
		if t.Is(tftypes.List{}) {
			et = t.(tftypes.List).ElementType
		} else {
			et = t.(tftypes.Set).ElementType
		}
		for i, ev := range vals {
			nv, err := deepUnknown(et, ev, p.WithElementKeyInt(i))
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[i] = nv
		}
		return tftypes.NewValue(t, vals), nil
	default:
		if !v.IsNull() {
			return v, nil
		}
		return tftypes.NewValue(t, tftypes.UnknownValue), nil
	}
}

// unknownToNull replaces every unknown value in a structure with null.
func unknownToNull(v tftypes.Value) tftypes.Value {
	if !v.IsKnown() {
		return tftypes.NewValue(v.Type(), nil)
	}
	if v.IsNull() {
		return v
	}
	switch {
	case v.Type().Is(tftypes.List{}), v.Type().Is(tftypes.Set{}), v.Type().Is(tftypes.Tuple{}):
		var l []tftypes.Value
		_ = v.As(&l)
		for i := range l {
			l[i] = unknownToNull(l[i])
		}
		return tftypes.NewValue(v.Type(), l)
	case v.Type().Is(tftypes.Map{}), v.Type().Is(tftypes.Object{}):
		var m map[string]tftypes.Value
		_ = v.As(&m)
		for k := range m {
			m[k] = unknownToNull(m[k])
		}
		return tftypes.NewValue(v.Type(), m)
	}
	return v
}

// typePath normalises a value path to the type path the hints use (map keys "#", list indexes -1).
func typePath(p *tftypes.AttributePath) *tftypes.AttributePath {
	steps := make([]tftypes.AttributePathStep, 0, len(p.Steps()))
	for _, s := range p.Steps() {
		switch v := s.(type) {
		case tftypes.AttributeName:
			steps = append(steps, v)
		case tftypes.ElementKeyString:
			steps = append(steps, tftypes.ElementKeyString("#"))
		case tftypes.ElementKeyInt:
			steps = append(steps, tftypes.ElementKeyInt(-1))
		}
	}
	return tftypes.NewAttributePathWithSteps(steps)
}
