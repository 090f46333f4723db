package manifest

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/kubectl/pkg/polymorphichelpers"
)

const (
	defaultFieldManager = "Terraform"
	defaultTimeout      = "10m"
	waiterSleep         = time.Second
)

func attrPath(names ...string) *tftypes.AttributePath {
	p := tftypes.NewAttributePath()
	for _, n := range names {
		p = p.WithAttributeName(n)
	}
	return p
}

func (s *Server) ValidateResourceTypeConfig(ctx context.Context, req *tfprotov5.ValidateResourceTypeConfigRequest) (*tfprotov5.ValidateResourceTypeConfigResponse, error) {
	resp := &tfprotov5.ValidateResourceTypeConfigResponse{}
	cfg, err := req.Config.Unmarshal(resourceType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to unmarshal resource state", err.Error()))
		return resp, nil
	}
	var vals map[string]tftypes.Value
	if err := cfg.As(&vals); err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to extract resource state from SDK value", err.Error()))
		return resp, nil
	}
	att := attrPath("manifest")
	man, ok := vals["manifest"]
	if !ok {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(att, "Manifest missing from resource configuration", "A manifest attribute containing a valid Kubernetes resource configuration is required."))
		return resp, nil
	}
	if !man.IsKnown() {
		return resp, nil
	}
	var raw map[string]tftypes.Value
	if err := man.As(&raw); err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(att, `Failed to extract "manifest" attribute value from resource configuration`, err.Error()))
		return resp, nil
	}
	for _, k := range []string{"apiVersion", "kind", "metadata"} {
		if _, ok := raw[k]; !ok {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(att.WithAttributeName(k), `Attribute key missing from "manifest" value`, fmt.Sprintf("'%s' attribute key is missing from manifest configuration", k)))
		}
	}
	if _, ok := raw["status"]; ok {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(att.WithAttributeName("status"), `Forbidden attribute key in "manifest" value`, "'status' attribute key is not allowed in manifest configuration"))
	}
	if tv := vals["timeouts"]; tv.IsKnown() && !tv.IsNull() {
		var blocks []tftypes.Value
		_ = tv.As(&blocks)
		if len(blocks) > 0 {
			var t map[string]tftypes.Value
			_ = blocks[0].As(&t)
			for _, k := range []string{"create", "update", "delete"} {
				if v, ok := t[k]; ok && v.IsKnown() && !v.IsNull() {
					var ds string
					_ = v.As(&ds)
					if _, err := time.ParseDuration(ds); err != nil {
						resp.Diagnostics = append(resp.Diagnostics, errDiag(attrPath("timeouts").WithElementKeyInt(0).WithAttributeName(k), fmt.Sprintf("Error parsing timeout for %q", k), err.Error()))
					}
				}
			}
		}
	}
	if wv := vals["wait"]; wv.IsKnown() && !wv.IsNull() {
		var blocks []tftypes.Value
		_ = wv.As(&blocks)
		if len(blocks) > 0 {
			var w map[string]tftypes.Value
			_ = blocks[0].As(&w)
			set := []string{}
			for _, k := range []string{"rollout", "condition", "fields"} {
				v := w[k]
				if v.IsNull() {
					continue
				}
				if k == "condition" {
					var l []tftypes.Value
					_ = v.As(&l)
					if len(l) == 0 {
						continue
					}
				}
				if k == "rollout" && v.IsKnown() {
					var b bool
					_ = v.As(&b)
					if !b {
						continue
					}
				}
				set = append(set, k)
			}
			if len(set) > 1 {
				resp.Diagnostics = append(resp.Diagnostics, errDiag(attrPath("wait"), "Invalid wait configuration", fmt.Sprintf(`You may only set one of "%s".`, strings.Join(set, "\", \""))))
			}
		}
	}
	if wf := vals["wait_for"]; !wf.IsNull() {
		resp.Diagnostics = append(resp.Diagnostics, &tfprotov5.Diagnostic{Severity: tfprotov5.DiagnosticSeverityWarning, Attribute: attrPath("wait_for"),
			Summary: "Deprecated Attribute", Detail: `The "wait_for" attribute has been deprecated. Please use the "wait" block instead.`})
	}
	return resp, nil
}

func (s *Server) UpgradeResourceState(ctx context.Context, req *tfprotov5.UpgradeResourceStateRequest) (*tfprotov5.UpgradeResourceStateResponse, error) {
	resp := &tfprotov5.UpgradeResourceStateResponse{}
	v, err := req.RawState.Unmarshal(resourceType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to unmarshal old state during upgrade", err.Error()))
		return resp, nil
	}
	dv, err := tfprotov5.NewDynamicValue(resourceType, v)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to encode new state during upgrade", err.Error()))
		return resp, nil
	}
	resp.UpgradedState = &dv
	return resp, nil
}

func (s *Server) ImportResourceState(ctx context.Context, req *tfprotov5.ImportResourceStateRequest) (*tfprotov5.ImportResourceStateResponse, error) {
	return &tfprotov5.ImportResourceStateResponse{Diagnostics: []*tfprotov5.Diagnostic{errDiag(nil,
		"Import is not supported by the themelio sandbox stand-in", "kubernetes_manifest import is not implemented by this stand-in provider.")}}, nil
}

func (s *Server) MoveResourceState(ctx context.Context, req *tfprotov5.MoveResourceStateRequest) (*tfprotov5.MoveResourceStateResponse, error) {
	return &tfprotov5.MoveResourceStateResponse{Diagnostics: []*tfprotov5.Diagnostic{errDiag(nil,
		"Move is not supported by the themelio sandbox stand-in", "kubernetes_manifest does not support moving state.")}}, nil
}

func (s *Server) UpgradeResourceIdentity(ctx context.Context, req *tfprotov5.UpgradeResourceIdentityRequest) (*tfprotov5.UpgradeResourceIdentityResponse, error) {
	return &tfprotov5.UpgradeResourceIdentityResponse{}, nil
}

// computedFields: the configured computed_fields, or metadata.annotations and metadata.labels.
func computedFields(vals map[string]tftypes.Value) (map[string]*tftypes.AttributePath, []*tfprotov5.Diagnostic) {
	out := map[string]*tftypes.AttributePath{}
	var diags []*tfprotov5.Diagnostic
	cf, ok := vals["computed_fields"]
	if ok && !cf.IsNull() && cf.IsKnown() {
		for _, f := range strList(cf) {
			p, err := fieldPath(f)
			if err != nil {
				diags = append(diags, errDiag(nil, "[computed_fields] cannot parse field path element: "+f, err.Error()))
				continue
			}
			out[p.String()] = p
		}
		return out, diags
	}
	for _, p := range []*tftypes.AttributePath{attrPath("metadata", "annotations"), attrPath("metadata", "labels")} {
		out[p.String()] = p
	}
	return out, diags
}

func fieldManager(vals map[string]tftypes.Value) (string, bool) {
	name, force := defaultFieldManager, false
	fm := vals["field_manager"]
	if fm.IsNull() || !fm.IsKnown() {
		return name, force
	}
	var blocks []tftypes.Value
	_ = fm.As(&blocks)
	if len(blocks) == 0 {
		return name, force
	}
	var b map[string]tftypes.Value
	_ = blocks[0].As(&b)
	if v := b["name"]; !v.IsNull() && v.IsKnown() {
		_ = v.As(&name)
	}
	if v := b["force_conflicts"]; !v.IsNull() && v.IsKnown() {
		_ = v.As(&force)
	}
	return name, force
}

func timeouts(vals map[string]tftypes.Value) map[string]string {
	t := map[string]string{"create": defaultTimeout, "update": defaultTimeout, "delete": defaultTimeout}
	tv := vals["timeouts"]
	if tv.IsNull() || !tv.IsKnown() {
		return t
	}
	var blocks []tftypes.Value
	_ = tv.As(&blocks)
	if len(blocks) == 0 {
		return t
	}
	var b map[string]tftypes.Value
	_ = blocks[0].As(&b)
	for _, k := range []string{"create", "update", "delete"} {
		if v, ok := b[k]; ok && !v.IsNull() && v.IsKnown() {
			var s string
			_ = v.As(&s)
			if s != "" {
				t[k] = s
			}
		}
	}
	return t
}

func walk(v tftypes.Value, p *tftypes.AttributePath) (tftypes.Value, bool) {
	r, rest, err := tftypes.WalkAttributePath(v, p)
	if err != nil || len(rest.Steps()) != 0 {
		return tftypes.Value{}, false
	}
	rv, ok := r.(tftypes.Value)
	return rv, ok
}

func (s *Server) PlanResourceChange(ctx context.Context, req *tfprotov5.PlanResourceChangeRequest) (*tfprotov5.PlanResourceChangeResponse, error) {
	resp := &tfprotov5.PlanResourceChangeResponse{}
	proposed, err := req.ProposedNewState.Unmarshal(resourceType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to unmarshal planned resource state", err.Error()))
		return resp, nil
	}
	proposedVal := map[string]tftypes.Value{}
	if err := proposed.As(&proposedVal); err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to extract planned resource state from tftypes.Value", err.Error()))
		return resp, nil
	}
	canDefer := req.ClientCapabilities != nil && req.ClientCapabilities.DeferralAllowed
	if canDefer && s.configUnknown {
		proposedVal["object"] = tftypes.NewValue(tftypes.DynamicPseudoType, tftypes.UnknownValue)
		ps, err := tfprotov5.NewDynamicValue(proposed.Type(), tftypes.NewValue(proposed.Type(), proposedVal))
		if err != nil {
			return resp, err
		}
		resp.PlannedState = &ps
		resp.Deferred = &tfprotov5.Deferred{Reason: tfprotov5.DeferredReasonProviderConfigUnknown}
		return resp, nil
	}
	resp.RequiresReplace = append(resp.RequiresReplace, attrPath("manifest", "apiVersion"), attrPath("manifest", "kind"), attrPath("manifest", "metadata", "name"))
	if d := s.canExecute(); len(d) > 0 {
		resp.Diagnostics = append(resp.Diagnostics, d...)
		return resp, nil
	}
	if d := s.checkCredentials(ctx); len(d) > 0 {
		resp.Diagnostics = append(resp.Diagnostics, d...)
		return resp, nil
	}
	computed, d := computedFields(proposedVal)
	resp.Diagnostics = append(resp.Diagnostics, d...)

	prior, err := req.PriorState.Unmarshal(resourceType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to unmarshal prior resource state", err.Error()))
		return resp, nil
	}
	priorVal := map[string]tftypes.Value{}
	_ = prior.As(&priorVal)
	if proposed.IsNull() {
		resp.PlannedState = req.ProposedNewState // destroy
		return resp, nil
	}
	ppMan, ok := proposedVal["manifest"]
	if !ok {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(attrPath("manifest"), "Invalid proposed state during planning", "Missing 'manifest' attribute"))
		return resp, nil
	}
	rm, err := s.restMapper()
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to create K8s RESTMapper client", err.Error()))
		return resp, nil
	}
	gvk, err := gvkOf(ppMan, rm)
	if err != nil {
		rd := errDiag(nil, "API did not recognize GroupVersionKind from manifest (CRD may not be installed)", err.Error())
		resp.Diagnostics = append(resp.Diagnostics, rd)
		if canDefer && meta.IsNoMatchError(err) {
			resp.Deferred = &tfprotov5.Deferred{Reason: tfprotov5.DeferredReasonResourceConfigUnknown}
			rd.Severity = tfprotov5.DiagnosticSeverityWarning
		}
		return resp, nil
	}
	ns, err := isNamespaced(gvk, rm)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to discover scope of resource", err.Error()))
		return resp, nil
	}
	if vd := validateNamespace(ppMan, gvk.String(), ns); len(vd) > 0 {
		resp.Diagnostics = append(resp.Diagnostics, vd...)
		return resp, nil
	}
	if ns {
		resp.RequiresReplace = append(resp.RequiresReplace, attrPath("manifest", "metadata", "namespace"))
	}
	objectType, hints, err := s.objectType(ctx, gvk, false)
	if err != nil {
		return resp, fmt.Errorf("failed to determine resource type ID: %s", err)
	}
	if !objectType.Is(tftypes.Object{}) {
		// no schema: the configuration's own type, a dry run, and every change replaces
		objectType = ppMan.Type()
		resp.Diagnostics = append(resp.Diagnostics, &tfprotov5.Diagnostic{Severity: tfprotov5.DiagnosticSeverityWarning,
			Summary: "This custom resource does not have an associated OpenAPI schema.",
			Detail:  "We could not find an OpenAPI schema for this custom resource. Updates to this resource will cause a forced replacement."})
		name, force := fieldManager(proposedVal)
		if err := s.dryRun(ctx, ppMan, name, force, ns); err != nil {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Dry-run failed for non-structured resource",
				fmt.Sprintf("A dry-run apply was performed for this resource but was unsuccessful: %v", err)))
			return resp, nil
		}
		resp.RequiresReplace = []*tftypes.AttributePath{attrPath("manifest"), attrPath("object")}
	}
	morphed, md := morphValue(ppMan, objectType, attrPath("object"))
	if hasError(md) {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Manifest configuration incompatible with resource schema", "Detailed descriptions of errors will follow below."))
		resp.Diagnostics = append(resp.Diagnostics, md...)
		return resp, nil
	}
	complete, err := deepUnknown(objectType, morphed, attrPath("object"))
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(attrPath("object"), "Failed to backfill manifest from OpenAPI type", err.Error()))
		return resp, nil
	}
	if proposedVal["object"].IsNull() {
		// create: configured values known, computed fields and everything unset unknown
		obj, err := tftypes.Transform(complete, func(ap *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
			if _, ok := computed[ap.String()]; ok {
				return tftypes.NewValue(v.Type(), tftypes.UnknownValue), nil
			}
			return v, nil
		})
		if err != nil {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(attrPath("object"), "Failed to set computed attributes in new resource state", err.Error()))
			return resp, nil
		}
		proposedVal["object"] = obj
	} else {
		priorObj, priorMan := priorVal["object"], priorVal["manifest"]
		obj, err := tftypes.Transform(complete, func(ap *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
			_, isComputed := computed[ap.String()]
			if v.IsKnown() { // from the configuration
				was, wasOK := walk(priorMan, ap)
				now, nowOK := walk(ppMan, ap)
				changed := wasOK && nowOK && was.IsKnown() && !was.Equal(now)
				if changed && hints[typePath(ap).String()] == preserveUnknownHint {
					resp.Diagnostics = append(resp.Diagnostics, &tfprotov5.Diagnostic{Severity: tfprotov5.DiagnosticSeverityWarning,
						Summary: fmt.Sprintf("The attribute path %v value's type is an x-kubernetes-preserve-unknown-field", typePath(ap).String()),
						Detail:  "Changes to the type may cause some unexpected behavior."})
				}
				if isComputed {
					if changed {
						return tftypes.NewValue(v.Type(), tftypes.UnknownValue), nil
					}
					if cur, ok := walk(proposedVal["object"], ap); ok {
						return cur, nil
					}
				}
				return v, nil
			}
			if was, ok := walk(priorMan, ap); ok && was.IsKnown() {
				return v, nil // removed from the configuration: unknown, the API may default it
			}
			pv, rest, err := tftypes.WalkAttributePath(priorObj, ap)
			if err != nil {
				if len(rest.Steps()) > 0 {
					return v, nil
				}
				return v, ap.NewError(err)
			}
			return pv.(tftypes.Value), nil
		})
		if err != nil {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(attrPath("object"), "Failed to update proposed state from prior state", err.Error()))
			return resp, nil
		}
		proposedVal["object"] = obj
	}
	planned, err := tfprotov5.NewDynamicValue(proposed.Type(), tftypes.NewValue(proposed.Type(), proposedVal))
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to assemble proposed state during plan", err.Error()))
		return resp, nil
	}
	resp.PlannedState = &planned
	return resp, nil
}

func validateNamespace(man tftypes.Value, gvk string, namespaced bool) []*tfprotov5.Diagnostic {
	mdv, ok := walk(man, attrPath("metadata"))
	if !ok || !mdv.IsKnown() {
		return nil
	}
	var md map[string]tftypes.Value
	if mdv.As(&md) != nil {
		return nil
	}
	nsv, has := md["namespace"]
	p := attrPath("manifest", "metadata", "namespace")
	if namespaced {
		switch {
		case !has:
			return []*tfprotov5.Diagnostic{errDiag(p, "Namespace required", fmt.Sprintf("Resources of type '%s' require a namespace", gvk))}
		case nsv.IsNull():
			return []*tfprotov5.Diagnostic{errDiag(p, "Namespace required", fmt.Sprintf("Namespace for resource '%s' cannot be nil", gvk))}
		case nsv.IsKnown():
			var s string
			_ = nsv.As(&s)
			if s == "" {
				return []*tfprotov5.Diagnostic{errDiag(p, "Namespace required", fmt.Sprintf("Namespace for resource '%s' cannot be empty", gvk))}
			}
		}
	} else if has && !nsv.IsNull() {
		return []*tfprotov5.Diagnostic{errDiag(p, "Cluster level resource cannot take namespace", fmt.Sprintf("Resources of type '%s' cannot have a namespace", gvk))}
	}
	return nil
}

func (s *Server) resourceInterface(u *unstructured.Unstructured, namespaced bool) (dynamic.ResourceInterface, error) {
	c, err := s.dynamic()
	if err != nil {
		return nil, err
	}
	m, err := s.restMapper()
	if err != nil {
		return nil, err
	}
	gvr, err := gvrOf(u, m)
	if err != nil {
		return nil, fmt.Errorf("failed to determine resource GVR: %s", err)
	}
	if namespaced {
		return c.Resource(gvr).Namespace(u.GetNamespace()), nil
	}
	return c.Resource(gvr), nil
}

func (s *Server) dryRun(ctx context.Context, obj tftypes.Value, manager string, force, namespaced bool) error {
	pu, err := fromTFValue(unknownToNull(obj), nil, tftypes.NewAttributePath())
	if err != nil {
		return err
	}
	u := unstructured.Unstructured{Object: mapRemoveNulls(pu.(map[string]interface{}))}
	rs, err := s.resourceInterface(&u, namespaced)
	if err != nil {
		return err
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = rs.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: manager, Force: &force, DryRun: []string{"All"}})
	return err
}

func (s *Server) ReadResource(ctx context.Context, req *tfprotov5.ReadResourceRequest) (*tfprotov5.ReadResourceResponse, error) {
	resp := &tfprotov5.ReadResourceResponse{Private: req.Private}
	if req.ClientCapabilities != nil && req.ClientCapabilities.DeferralAllowed && s.configUnknown {
		resp.NewState = req.CurrentState
		resp.Deferred = &tfprotov5.Deferred{Reason: tfprotov5.DeferredReasonProviderConfigUnknown}
		return resp, nil
	}
	if d := s.canExecute(); len(d) > 0 {
		resp.Diagnostics = append(resp.Diagnostics, d...)
		return resp, nil
	}
	current, err := req.CurrentState.Unmarshal(resourceType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to decode current state", err.Error()))
		return resp, nil
	}
	if current.IsNull() {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to read resource", "Incomplete or missing state"))
		return resp, nil
	}
	state := map[string]tftypes.Value{}
	_ = current.As(&state)
	co, ok := state["object"]
	if !ok || co.IsNull() {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Current state of resource has no 'object' attribute", "This should not happen. The state may be incomplete or corrupted."))
		return resp, nil
	}
	rm, err := s.restMapper()
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to get RESTMapper client", err.Error()))
		return resp, nil
	}
	gvk, err := gvkOf(co, rm)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to determine GroupVersionResource for manifest", err.Error()))
		return resp, nil
	}
	objectType, hints, err := s.objectType(ctx, gvk, false)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to determine resource type from GVK.", err.Error()))
		return resp, nil
	}
	cu, err := fromTFValue(co, hints, tftypes.NewAttributePath())
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed encode 'object' attribute to Unstructured", err.Error()))
		return resp, nil
	}
	u := unstructured.Unstructured{Object: cu.(map[string]interface{})}
	ns, err := isNamespaced(u.GroupVersionKind(), rm)
	if err != nil {
		return resp, err
	}
	rs, err := s.resourceInterface(&u, ns)
	if err != nil {
		return resp, err
	}
	ro, err := rs.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return resp, nil // gone: removed from state
		}
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("Cannot GET resource %s/%s", u.GetNamespace(), u.GetName()), err.Error()))
		return resp, nil
	}
	nobj, err := toTFValue(removeServerSideFields(ro.Object), objectType, hints, tftypes.NewAttributePath())
	if err != nil {
		return resp, err
	}
	nobj, err = deepUnknown(objectType, nobj, tftypes.NewAttributePath())
	if err != nil {
		return resp, err
	}
	state["object"] = unknownToNull(nobj)
	ns2, err := tfprotov5.NewDynamicValue(current.Type(), tftypes.NewValue(current.Type(), state))
	if err != nil {
		return resp, err
	}
	resp.NewState = &ns2
	return resp, nil
}

func (s *Server) ApplyResourceChange(ctx context.Context, req *tfprotov5.ApplyResourceChangeRequest) (*tfprotov5.ApplyResourceChangeResponse, error) {
	resp := &tfprotov5.ApplyResourceChangeResponse{}
	if d := s.canExecute(); len(d) > 0 {
		resp.Diagnostics = append(resp.Diagnostics, d...)
		return resp, nil
	}
	planned, err := req.PlannedState.Unmarshal(resourceType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to unmarshal planned resource state", err.Error()))
		return resp, nil
	}
	prior, err := req.PriorState.Unmarshal(resourceType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to unmarshal prior resource state", err.Error()))
		return resp, nil
	}
	config, err := req.Config.Unmarshal(resourceType)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to unmarshal manifest configuration", err.Error()))
		return resp, nil
	}
	confVals := map[string]tftypes.Value{}
	_ = config.As(&confVals)
	plannedVal := map[string]tftypes.Value{}
	_ = planned.As(&plannedVal)
	rm, err := s.restMapper()
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to retrieve Kubernetes RESTMapper client during apply", err.Error()))
		return resp, nil
	}
	if planned.IsNull() {
		return s.applyDelete(ctx, req, prior, rm)
	}
	computed, _ := computedFields(plannedVal)
	obj := plannedVal["object"]
	gvk, err := gvkOf(obj, rm)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to determine the type of the resource",
			fmt.Sprintf(`This can happen when the "apiVersion" or "kind" fields are not present in the manifest, or when the corresponding "kind" or "apiVersion" could not be found on the Kubernetes cluster.
Error: %s`, err)))
		return resp, nil
	}
	tsch, hints, err := s.objectType(ctx, gvk, false)
	if err != nil {
		return resp, fmt.Errorf("failed to determine resource type ID: %s", err)
	}
	// computed attributes were planned unknown: send the configured value where the manifest has one
	obj, err = tftypes.Transform(obj, func(ap *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if _, ok := computed[ap.String()]; !ok || v.IsKnown() {
			return v, nil
		}
		mv, ok := walk(plannedVal["manifest"], ap)
		if !ok {
			return v, nil
		}
		nv, d := morphValue(mv, v.Type(), tftypes.NewAttributePath())
		if len(d) > 0 {
			resp.Diagnostics = append(resp.Diagnostics, d...)
			return v, nil
		}
		return nv, nil
	})
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to backfill computed values in proposed value", err.Error()))
		return resp, nil
	}
	// drop objects that only exist for the type's structure (all null), unless the manifest sets them
	minObj, err := tftypes.Transform(unknownToNull(obj), func(ap *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if v.IsNull() {
			return tftypes.NewValue(v.Type(), nil), nil
		}
		if v.Type().Is(tftypes.Object{}) || v.Type().Is(tftypes.Map{}) {
			atts := map[string]tftypes.Value{}
			if err := v.As(&atts); err != nil {
				return v, err
			}
			empty := true
			for _, a := range atts {
				if !a.IsNull() {
					empty = false
					break
				}
			}
			_, inConfig := walk(confVals["manifest"], ap)
			if inConfig || !empty {
				return tftypes.NewValue(v.Type(), atts), nil
			}
			return tftypes.NewValue(v.Type(), nil), nil
		}
		return v, nil
	})
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to sanitize empty block ahead of payload preparation", err.Error()))
		return resp, nil
	}
	pu, err := fromTFValue(minObj, hints, tftypes.NewAttributePath())
	if err != nil {
		return resp, err
	}
	u := unstructured.Unstructured{Object: mapRemoveNulls(pu.(map[string]interface{}))}
	ns, err := isNamespaced(gvk, rm)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("Failed to discover scope of resource '%s/%s'", u.GetNamespace(), u.GetName()), err.Error()))
		return resp, nil
	}
	rs, err := s.resourceInterface(&u, ns)
	if err != nil {
		return resp, err
	}
	rnn := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}.String()
	if prior.IsNull() {
		if _, err := rs.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Cannot create resource that already exists", fmt.Sprintf("resource %q already exists", rnn)))
			return resp, nil
		} else if !apierrors.IsNotFound(err) {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("Failed to determine if resource %q exists", rnn), err.Error()))
			return resp, nil
		}
	}
	body, err := u.MarshalJSON()
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("Failed to marshall resource %q to JSON", rnn), err.Error()))
		return resp, nil
	}
	manager, force := fieldManager(plannedVal)
	to := timeouts(plannedVal)
	timeout, _ := time.ParseDuration(to["update"])
	if prior.IsNull() {
		timeout, _ = time.ParseDuration(to["create"])
	}
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(timeout))
	defer cancel()
	result, err := rs.Patch(dctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: manager, Force: &force})
	if err != nil {
		var status apierrors.APIStatus
		switch {
		case apierrors.IsConflict(err):
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("There was a field manager conflict when trying to apply the manifest for %q", rnn),
				fmt.Sprintf("The API returned the following conflict: %q\n\nYou can override this conflict by setting \"force_conflicts\" to true in the \"field_manager\" block.", err.Error())))
		case errors.As(err, &status):
			st := status.Status()
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("API response status: %s", st.Status), st.Message))
			if st.Details != nil {
				for _, c := range st.Details.Causes {
					resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, st.Message, fmt.Sprintf("%s: %s", c.Field, c.Message)))
				}
			}
		default:
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("Failed to create resource %q", rnn), err.Error()))
		}
		return resp, nil
	}
	wt, _, err := s.objectType(ctx, gvk, true)
	if err != nil {
		return resp, fmt.Errorf("failed to determine resource type ID: %s", err)
	}
	var waitConfig tftypes.Value
	if w, ok := plannedVal["wait"]; ok && !w.IsNull() {
		var blocks []tftypes.Value
		_ = w.As(&blocks)
		if len(blocks) > 0 {
			waitConfig = blocks[0]
		}
	}
	if wf, ok := plannedVal["wait_for"]; ok && !wf.IsNull() {
		waitConfig = wf
	}
	if waitConfig.Type() != nil && !waitConfig.IsNull() {
		if err := waitFor(dctx, waitConfig, rs, u.GetName(), wt, hints); err != nil {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Error waiting for operation to complete", err.Error()))
		}
		r, err := rs.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Error retrieving resource after wait", err.Error()))
			return resp, nil
		}
		result = r
	}
	newObj, err := toTFValue(removeServerSideFields(result.Object), tsch, hints, tftypes.NewAttributePath())
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Conversion from Unstructured to tftypes.Value failed", err.Error()))
		return resp, nil
	}
	comp, err := deepUnknown(tsch, newObj, tftypes.NewAttributePath())
	if err != nil {
		return resp, err
	}
	plannedVal["object"] = unknownToNull(comp)
	nsv, err := tfprotov5.NewDynamicValue(planned.Type(), tftypes.NewValue(planned.Type(), plannedVal))
	if err != nil {
		return resp, err
	}
	resp.NewState = &nsv
	return resp, nil
}

func (s *Server) applyDelete(ctx context.Context, req *tfprotov5.ApplyResourceChangeRequest, prior tftypes.Value, rm meta.RESTMapper) (*tfprotov5.ApplyResourceChangeResponse, error) {
	resp := &tfprotov5.ApplyResourceChangeResponse{}
	priorVal := map[string]tftypes.Value{}
	_ = prior.As(&priorVal)
	pco, ok := priorVal["object"]
	if !ok {
		resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Failed to find object value in prior resource state", ""))
		return resp, nil
	}
	pu, err := fromTFValue(pco, nil, tftypes.NewAttributePath())
	if err != nil {
		return resp, err
	}
	u := unstructured.Unstructured{Object: pu.(map[string]interface{})}
	gvk, err := gvkOf(pco, rm)
	if err != nil {
		return resp, fmt.Errorf("failed to determine resource GVK: %s", err)
	}
	ns, err := isNamespaced(gvk, rm)
	if err != nil {
		return resp, err
	}
	rs, err := s.resourceInterface(&u, ns)
	if err != nil {
		return resp, err
	}
	timeout, _ := time.ParseDuration(timeouts(priorVal)["delete"])
	deadline := time.Now().Add(timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	rnn := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}.String()
	if err := rs.Delete(dctx, u.GetName(), metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			resp.Diagnostics = append(resp.Diagnostics, &tfprotov5.Diagnostic{Severity: tfprotov5.DiagnosticSeverityWarning,
				Summary: "Resource already deleted", Detail: fmt.Sprintf("The resource %q was already deleted from the cluster.", rnn)})
		} else {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("Error deleting resource %s: %s", rnn, err), err.Error()))
			return resp, nil
		}
	}
	for {
		if time.Now().After(deadline) {
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, fmt.Sprintf("Timed out when waiting for resource %q to be deleted", rnn),
				"Deletion timed out. This can happen when there is a finalizer on a resource. You may need to delete this resource manually with kubectl."))
			return resp, nil
		}
		if _, err := rs.Get(dctx, u.GetName(), metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				break
			}
			resp.Diagnostics = append(resp.Diagnostics, errDiag(nil, "Error waiting for deletion.", fmt.Sprintf("Error when waiting for resource %q to be deleted: %v", rnn, err)))
			return resp, nil
		}
		time.Sleep(time.Second)
	}
	resp.NewState = req.PlannedState
	return resp, nil
}

// ---- waiters: rollout, conditions, fields ----

func waitFor(ctx context.Context, cfg tftypes.Value, rs dynamic.ResourceInterface, name string, rtype tftypes.Type, hints map[string]string) error {
	var w map[string]tftypes.Value
	if err := cfg.As(&w); err != nil {
		return err
	}
	expired := func(reason string) error {
		if dl, ok := ctx.Deadline(); ok && time.Now().After(dl) {
			return fmt.Errorf("timed out waiting on %s", reason)
		}
		return nil
	}
	if v, ok := w["rollout"]; ok && !v.IsNull() && v.IsKnown() {
		var rollout bool
		_ = v.As(&rollout)
		if rollout {
			for {
				if err := expired("rollout to complete"); err != nil {
					return err
				}
				res, err := rs.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				sv, err := polymorphichelpers.StatusViewerFor(res.GroupVersionKind().GroupKind())
				if err != nil {
					return fmt.Errorf("error getting resource status: %v", err)
				}
				if _, done, err := sv.Status(res, 0); err != nil {
					return fmt.Errorf("error getting resource status: %v", err)
				} else if done {
					return nil
				}
				time.Sleep(waiterSleep)
			}
		}
	}
	if v, ok := w["condition"]; ok && !v.IsNull() && v.IsKnown() {
		var conds []tftypes.Value
		_ = v.As(&conds)
		if len(conds) > 0 {
			for {
				if err := expired("conditions"); err != nil {
					return err
				}
				res, err := rs.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if status, ok := res.Object["status"].(map[string]interface{}); ok {
					if have, ok := status["conditions"].([]interface{}); ok && len(have) > 0 {
						all := true
						for _, c := range conds {
							var cm map[string]tftypes.Value
							_ = c.As(&cm)
							var ct, cs string
							_ = cm["type"].As(&ct)
							_ = cm["status"].As(&cs)
							met := false
							for _, h := range have {
								hm, _ := h.(map[string]interface{})
								if hm["type"] == ct {
									met = hm["status"] == cs
									break
								}
							}
							all = all && met
						}
						if all {
							return nil
						}
					}
				}
				time.Sleep(waiterSleep)
			}
		}
	}
	fields, ok := w["fields"]
	if !ok || fields.IsNull() || !fields.IsKnown() {
		return nil
	}
	var fm map[string]tftypes.Value
	_ = fields.As(&fm)
	type matcher struct {
		p  *tftypes.AttributePath
		re *regexp.Regexp
	}
	var ms []matcher
	for k, v := range fm {
		var expr string
		_ = v.As(&expr)
		re := regexp.MustCompile("(.*)?")
		if expr != "*" {
			var err error
			if re, err = regexp.Compile(expr); err != nil {
				return fmt.Errorf("invalid regular expression: %q", expr)
			}
		}
		p, err := fieldPath(k)
		if err != nil {
			return err
		}
		ms = append(ms, matcher{p, re})
	}
	for {
		if err := expired("field matchers"); err != nil {
			return err
		}
		res, err := rs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if md, ok := res.Object["metadata"].(map[string]interface{}); ok {
			delete(md, "managedFields")
		}
		obj, err := toTFValue(res.Object, rtype, hints, tftypes.NewAttributePath())
		if err != nil {
			return err
		}
		done := true
		for _, m := range ms {
			v, ok := walk(obj, m.p)
			if !ok {
				done = false
				break
			}
			var s string
			switch {
			case v.IsNull() || !v.IsKnown():
				done = false
			case v.Type().Is(tftypes.String):
				_ = v.As(&s)
			case v.Type().Is(tftypes.Bool):
				var b bool
				_ = v.As(&b)
				s = fmt.Sprintf("%t", b)
			case v.Type().Is(tftypes.Number):
				var f big.Float
				_ = v.As(&f)
				if f.IsInt() {
					i, _ := f.Int64()
					s = fmt.Sprintf("%d", i)
				} else {
					fv, _ := f.Float64()
					s = fmt.Sprintf("%f", fv)
				}
			default:
				return fmt.Errorf("wait_for: cannot match on type %q", v.Type().String())
			}
			if !done || !m.re.MatchString(s) {
				done = false
				break
			}
		}
		if done {
			return nil
		}
		time.Sleep(waiterSleep)
	}
}
