package manifest

import (
	"fmt"
	"math/big"
	"reflect"
	"strconv"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// fromTFValue turns a Terraform value into the JSON-like Go value sent to the API: integers as int64, int-or-string
// strings that hold an integer as integers, objects and maps as maps (nulls included; mapRemoveNulls drops them).
func fromTFValue(in tftypes.Value, hints map[string]string, ap *tftypes.AttributePath) (interface{}, error) {
	if !in.IsKnown() {
		return nil, ap.NewErrorf("[%s] cannot convert unknown value to Unstructured", ap.String())
	}
	if in.IsNull() {
		return nil, nil
	}
	t := in.Type()
	switch {
	case t.Is(tftypes.DynamicPseudoType):
		return nil, ap.NewErrorf("[%s] cannot convert dynamic value to Unstructured", ap.String())
	case t.Is(tftypes.Bool):
		var b bool
		err := in.As(&b)
		return b, err
	case t.Is(tftypes.Number):
		var f big.Float
		if err := in.As(&f); err != nil {
			return nil, err
		}
		if f.IsInt() {
			i, acc := f.Int64()
			if acc != big.Exact {
				return nil, ap.NewErrorf("[%s] inexact integer approximation when converting number value at:", ap.String())
			}
			return i, nil
		}
		fv, _ := f.Float64()
		return fv, nil
	case t.Is(tftypes.String):
		var s string
		if err := in.As(&s); err != nil {
			return nil, err
		}
		if hints[typePath(ap).String()] == intOrStringHint {
			if n, err := strconv.Atoi(s); err == nil {
				return n, nil
			}
		}
		return s, nil
	case t.Is(tftypes.List{}), t.Is(tftypes.Tuple{}), t.Is(tftypes.Set{}):
		var l []tftypes.Value
		if err := in.As(&l); err != nil {
			return nil, err
		}
		out := []interface{}{}
		for i, e := range l {
			v, err := fromTFValue(e, hints, ap.WithElementKeyInt(i))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case t.Is(tftypes.Map{}), t.Is(tftypes.Object{}):
		var m map[string]tftypes.Value
		if err := in.As(&m); err != nil {
			return nil, err
		}
		out := map[string]interface{}{}
		for k, e := range m {
			ep := ap.WithElementKeyString(k)
			if t.Is(tftypes.Object{}) {
				ep = ap.WithAttributeName(k)
			}
			v, err := fromTFValue(e, hints, ep)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	return nil, ap.NewErrorf("[%s] cannot convert value of unknown type (%s)", ap.String(), t.String())
}

func intToTF(i int64, st tftypes.Type, hints map[string]string, at *tftypes.AttributePath, kind string) (tftypes.Value, error) {
	switch {
	case st.Is(tftypes.Number), st.Is(tftypes.DynamicPseudoType):
		return tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(i)), nil
	case st.Is(tftypes.String):
		if hints[typePath(at).String()] == intOrStringHint {
			return tftypes.NewValue(tftypes.String, strconv.FormatInt(i, 10)), nil
		}
		return tftypes.Value{}, at.NewErrorf(`[%s] cannot convert payload from "%s" to "tftypes.String"`, at.String(), kind)
	}
	return tftypes.Value{}, at.NewErrorf(`[%s] cannot convert payload from "%s" to "%s"`, at.String(), kind, st.String())
}

// toTFValue turns an API object (decoded JSON) into a value of type st; attributes of st the object lacks are null.
func toTFValue(in interface{}, st tftypes.Type, hints map[string]string, at *tftypes.AttributePath) (tftypes.Value, error) {
	if st == nil {
		return tftypes.Value{}, at.NewErrorf("[%s] type cannot be nil", at.String())
	}
	if in == nil {
		return tftypes.NewValue(st, nil), nil
	}
	switch v := in.(type) {
	case string:
		switch {
		case st.Is(tftypes.String), st.Is(tftypes.DynamicPseudoType):
			return tftypes.NewValue(tftypes.String, v), nil
		case st.Is(tftypes.Number):
			n, err := strconv.Atoi(v)
			if err != nil {
				return tftypes.Value{}, err
			}
			return tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(int64(n))), nil
		}
		return tftypes.Value{}, at.NewErrorf(`[%s] cannot convert payload from "string" to "%s"`, at.String(), st.String())
	case bool:
		if st.Is(tftypes.Bool) || st.Is(tftypes.DynamicPseudoType) {
			return tftypes.NewValue(tftypes.Bool, v), nil
		}
		return tftypes.Value{}, at.NewErrorf(`[%s] cannot convert payload from "bool" to "%s"`, at.String(), st.String())
	case int:
		return intToTF(int64(v), st, hints, at, "int")
	case int64:
		return intToTF(v, st, hints, at, "int64")
	case int32:
		return intToTF(int64(v), st, hints, at, "int32")
	case float64:
		if st.Is(tftypes.Number) || st.Is(tftypes.DynamicPseudoType) {
			return tftypes.NewValue(tftypes.Number, new(big.Float).SetFloat64(v)), nil
		}
		return tftypes.Value{}, at.NewErrorf(`[%s] cannot convert payload from "float64" to "%s"`, at.String(), st.String())
	case []interface{}:
		switch {
		case st.Is(tftypes.List{}), st.Is(tftypes.Set{}):
			var et tftypes.Type
			if st.Is(tftypes.List{}) {
				et = st.(tftypes.List).ElementType
			} else {
				et = st.(tftypes.Set).ElementType
			}
			vals := make([]tftypes.Value, 0, len(v))
			var ot tftypes.Type
			for i, e := range v {
				ev, err := toTFValue(e, et, hints, at.WithElementKeyInt(i))
				if err != nil {
					return tftypes.Value{}, err
				}
				if ot == nil {
					ot = ev.Type()
				} else if !ot.Is(ev.Type()) {
					return tftypes.Value{}, at.NewErrorf("[%s] conflicting list element type: %s", at.WithElementKeyInt(i).String(), ev.Type())
				}
				vals = append(vals, ev)
			}
			if ot == nil {
				ot = et
			}
			if st.Is(tftypes.List{}) {
				return tftypes.NewValue(tftypes.List{ElementType: ot}, vals), nil
			}
			return tftypes.NewValue(tftypes.Set{ElementType: ot}, vals), nil
		case st.Is(tftypes.Tuple{}):
			ets := st.(tftypes.Tuple).ElementTypes
			vals := make([]tftypes.Value, len(v))
			types := make([]tftypes.Type, len(v))
			for i, e := range v {
				et := ets[0]
				if len(ets) == len(v) {
					et = ets[i]
				}
				ev, err := toTFValue(e, et, hints, at.WithElementKeyInt(i))
				if err != nil {
					return tftypes.Value{}, err
				}
				vals[i], types[i] = ev, ev.Type()
			}
			return tftypes.NewValue(tftypes.Tuple{ElementTypes: types}, vals), nil
		case st.Is(tftypes.DynamicPseudoType):
			vals := make([]tftypes.Value, len(v))
			types := make([]tftypes.Type, len(v))
			for i, e := range v {
				ev, err := toTFValue(e, tftypes.DynamicPseudoType, hints, at.WithElementKeyInt(i))
				if err != nil {
					return tftypes.Value{}, err
				}
				vals[i], types[i] = ev, ev.Type()
			}
			return tftypes.NewValue(tftypes.Tuple{ElementTypes: types}, vals), nil
		}
		return tftypes.Value{}, at.NewErrorf(`[%s] cannot convert payload from "[]interface{}" to "%s"`, at.String(), st.String())
	case map[string]interface{}:
		switch {
		case st.Is(tftypes.Object{}):
			vals := map[string]tftypes.Value{}
			types := map[string]tftypes.Type{}
			for k, kt := range st.(tftypes.Object).AttributeTypes {
				ev, err := toTFValue(v[k], kt, hints, at.WithAttributeName(k))
				if err != nil {
					return tftypes.Value{}, err
				}
				vals[k], types[k] = ev, ev.Type()
			}
			return tftypes.NewValue(tftypes.Object{AttributeTypes: types}, vals), nil
		case st.Is(tftypes.Map{}):
			et := st.(tftypes.Map).ElementType
			vals := map[string]tftypes.Value{}
			var ot tftypes.Type
			for k, e := range v {
				ev, err := toTFValue(e, et, hints, at.WithElementKeyString(k))
				if err != nil {
					return tftypes.Value{}, err
				}
				if ot == nil {
					ot = ev.Type()
				} else if !ot.Is(ev.Type()) {
					return tftypes.Value{}, at.NewErrorf("[%s] conflicting map element type: %s", at.WithElementKeyString(k).String(), ev.Type())
				}
				vals[k] = ev
			}
			if ot == nil {
				ot = et
			}
			return tftypes.NewValue(tftypes.Map{ElementType: ot}, vals), nil
		case st.Is(tftypes.DynamicPseudoType):
			vals := map[string]tftypes.Value{}
			types := map[string]tftypes.Type{}
			for k, e := range v {
				ev, err := toTFValue(e, tftypes.DynamicPseudoType, hints, at.WithAttributeName(k))
				if err != nil {
					return tftypes.Value{}, err
				}
				vals[k], types[k] = ev, ev.Type()
			}
			return tftypes.NewValue(tftypes.Object{AttributeTypes: types}, vals), nil
		}
		return tftypes.Value{}, at.NewErrorf(`[%s] cannot convert payload from "map[string]interface{}" to "%s"`, at.String(), st.String())
	}
	return tftypes.Value{}, at.NewErrorf(`[%s] cannot convert payload of unknown type "%s"`, at.String(), reflect.TypeOf(in).String())
}

func mapRemoveNulls(in map[string]interface{}) map[string]interface{} {
	for k, v := range in {
		switch tv := v.(type) {
		case []interface{}:
			in[k] = sliceRemoveNulls(tv)
		case map[string]interface{}:
			in[k] = mapRemoveNulls(tv)
		default:
			if v == nil {
				delete(in, k)
			}
		}
	}
	return in
}

func sliceRemoveNulls(in []interface{}) []interface{} {
	out := []interface{}{}
	for _, v := range in {
		switch tv := v.(type) {
		case []interface{}:
			out = append(out, sliceRemoveNulls(tv))
		case map[string]interface{}:
			out = append(out, mapRemoveNulls(tv))
		default:
			if v != nil {
				out = append(out, v)
			}
		}
	}
	return out
}

// removeServerSideFields drops status and the metadata that changes on every write.
func removeServerSideFields(in map[string]interface{}) map[string]interface{} {
	delete(in, "status")
	if md, ok := in["metadata"].(map[string]interface{}); ok {
		for _, k := range []string{"uid", "creationTimestamp", "resourceVersion", "generation", "selfLink", "managedFields"} {
			delete(md, k)
		}
	}
	return in
}

// fieldPath parses a computed_fields / wait.fields path: a.b["key"][0] (HCL traversal syntax).
func fieldPath(s string) (*tftypes.AttributePath, error) {
	p := tftypes.NewAttributePath()
	i := 0
	readIdent := func() string {
		start := i
		for i < len(s) && s[i] != '.' && s[i] != '[' {
			i++
		}
		return s[start:i]
	}
	name := readIdent()
	if name == "" {
		return nil, fmt.Errorf("invalid field path %q: missing root attribute", s)
	}
	p = p.WithAttributeName(name)
	for i < len(s) {
		switch s[i] {
		case '.':
			i++
			n := readIdent()
			if n == "" {
				return nil, fmt.Errorf("invalid field path %q", s)
			}
			p = p.WithAttributeName(n)
		case '[':
			i++
			if i < len(s) && s[i] == '"' {
				j := i + 1
				for j < len(s) && s[j] != '"' {
					if s[j] == '\\' {
						j++
					}
					j++
				}
				if j >= len(s) {
					return nil, fmt.Errorf("invalid field path %q: unterminated string", s)
				}
				key, err := strconv.Unquote(s[i : j+1])
				if err != nil {
					return nil, fmt.Errorf("invalid field path %q: %v", s, err)
				}
				p = p.WithElementKeyString(key)
				i = j + 1
			} else {
				j := i
				for j < len(s) && s[j] != ']' {
					j++
				}
				if s[i:j] == "*" {
					return nil, fmt.Errorf("splat is not supported")
				}
				n, err := strconv.Atoi(s[i:j])
				if err != nil {
					return nil, fmt.Errorf("index in field path must be an integer")
				}
				p = p.WithElementKeyInt(n)
				i = j
			}
			if i >= len(s) || s[i] != ']' {
				return nil, fmt.Errorf("invalid field path %q: missing ]", s)
			}
			i++
		default:
			return nil, fmt.Errorf("invalid field path %q", s)
		}
	}
	return p, nil
}
