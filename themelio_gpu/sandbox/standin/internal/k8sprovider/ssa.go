package k8sprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// kubernetes_labels: server-side apply of metadata.labels alone, under field_manager, with force; reading back
// the labels that field manager owns (managedFields) plus those configured.

func resourceLabels() *schema.Resource {
	return &schema.Resource{
		Description:   "This resource allows Terraform to manage the labels for a resource that already exists (themelio sandbox stand-in).",
		CreateContext: labelsCreate,
		ReadContext:   labelsRead,
		UpdateContext: labelsUpdate,
		DeleteContext: labelsDelete,
		Schema: map[string]*schema.Schema{
			"api_version": {Type: schema.TypeString, Description: "The apiVersion of the resource to label.", Required: true, ForceNew: true},
			"kind":        {Type: schema.TypeString, Description: "The kind of the resource to label.", Required: true, ForceNew: true},
			"metadata": {
				Type: schema.TypeList, Required: true, MaxItems: 1,
				Elem: &schema.Resource{Schema: map[string]*schema.Schema{
					"name":      {Type: schema.TypeString, Description: "The name of the resource.", Required: true, ForceNew: true},
					"namespace": {Type: schema.TypeString, Description: "The namespace of the resource.", Optional: true, ForceNew: true},
				}},
			},
			"labels":        {Type: schema.TypeMap, Description: "A map of labels to apply to the resource.", Required: true},
			"force":         {Type: schema.TypeBool, Description: "Force overwriting labels that were created or edited outside of Terraform.", Optional: true},
			"field_manager": {Type: schema.TypeString, Description: "Set the name of the field manager for the specified labels.", Optional: true, Default: defaultFieldManagerName, ValidateFunc: validation.StringIsNotWhiteSpace},
		},
	}
}

func metadataNameNamespace(d *schema.ResourceData) (string, string) {
	l, _ := d.Get("metadata").([]interface{})
	if len(l) == 0 || l[0] == nil {
		return "", ""
	}
	m := l[0].(map[string]interface{})
	name, _ := m["name"].(string)
	ns, _ := m["namespace"].(string)
	return name, ns
}

func labelsID(apiVersion, kind, name, namespace string) string {
	id := fmt.Sprintf("apiVersion=%v,kind=%v,name=%s", apiVersion, kind, name)
	if namespace != "" {
		id += fmt.Sprintf(",namespace=%v", namespace)
	}
	return id
}

func parseLabelsID(id string) (k8sschema.GroupVersionKind, string, string, error) {
	parts := strings.Split(id, ",")
	if len(parts) < 3 || len(parts) > 4 {
		return k8sschema.GroupVersionKind{}, "", "", fmt.Errorf("could not parse ID: %q. ID must contain apiVersion, kind, and name", id)
	}
	namespace := "default"
	var apiVersion, kind, name string
	for _, p := range parts {
		kv := strings.Split(p, "=")
		if len(kv) != 2 {
			return k8sschema.GroupVersionKind{}, "", "", fmt.Errorf("could not parse ID: %q. ID must be in key=value format", id)
		}
		switch kv[0] {
		case "apiVersion":
			apiVersion = kv[1]
		case "kind":
			kind = kv[1]
		case "name":
			name = kv[1]
		case "namespace":
			namespace = kv[1]
		default:
			return k8sschema.GroupVersionKind{}, "", "", fmt.Errorf("could not parse ID: %q. ID contained unknown key %q", id, kv[0])
		}
	}
	return k8sschema.FromAPIVersionAndKind(apiVersion, kind), name, namespace, nil
}

// resourceClient finds the resource of gvk through discovery (a fresh REST mapper each call, as the real one).
func resourceClient(m *Meta, gvk k8sschema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, bool, string, error) {
	conn, err := m.Dynamic()
	if err != nil {
		return nil, false, "", err
	}
	dc, err := m.Discovery()
	if err != nil {
		return nil, false, "", err
	}
	agr, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, false, "", err
	}
	mapping, err := restmapper.NewDiscoveryRESTMapper(agr).RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, false, "", err
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			namespace = "default"
		}
		return conn.Resource(mapping.Resource).Namespace(namespace), true, namespace, nil
	}
	return conn.Resource(mapping.Resource), false, namespace, nil
}

func labelsCreate(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	name, ns := metadataNameNamespace(d)
	d.SetId(labelsID(d.Get("api_version").(string), d.Get("kind").(string), name, ns))
	diags := labelsUpdate(ctx, d, m)
	if diags.HasError() {
		d.SetId("")
	}
	return diags
}

func labelsRead(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	gvk, name, namespace, err := parseLabelsID(d.Id())
	if err != nil {
		return diag.FromErr(err)
	}
	r, _, _, err := resourceClient(m.(*Meta), gvk, namespace)
	if err != nil {
		return diag.FromErr(err)
	}
	res, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return diag.Diagnostics{{Severity: diag.Warning, Summary: "Resource deleted",
				Detail: fmt.Sprintf("The underlying resource %q has been deleted. You should recreate the underlying resource, or remove it from your configuration.", name)}}
		}
		return diag.FromErr(err)
	}
	configured := d.Get("labels").(map[string]interface{})
	owned, err := ownedMetadataKeys(res.GetManagedFields(), d.Get("field_manager").(string), "f:labels")
	if err != nil {
		return diag.FromErr(err)
	}
	labels := res.GetLabels()
	for k := range labels {
		_, isOwned := owned["f:"+k]
		_, isConfigured := configured[k]
		if !isOwned && !isConfigured {
			delete(labels, k)
		}
	}
	d.Set("labels", labels)
	return nil
}

// ownedMetadataKeys returns the keys under metadata.<field> that the named manager's managedFields entries own
// (the last entry of that manager wins, as in the real provider).
func ownedMetadataKeys(entries []metav1.ManagedFieldsEntry, manager, field string) (map[string]interface{}, error) {
	var owned map[string]interface{}
	for _, e := range entries {
		if e.Manager != manager || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]interface{}
		if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
			return nil, err
		}
		if md, ok := fields["f:metadata"].(map[string]interface{}); ok {
			if l, ok := md[field].(map[string]interface{}); ok {
				owned = l
			}
		}
	}
	return owned, nil
}

func labelsUpdate(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	apiVersion := d.Get("api_version").(string)
	kind := d.Get("kind").(string)
	name, namespace := metadataNameNamespace(d)
	gv, err := k8sschema.ParseGroupVersion(apiVersion)
	if err != nil {
		return diag.FromErr(err)
	}
	r, namespaced, namespace, err := resourceClient(m.(*Meta), gv.WithKind(kind), namespace)
	if err != nil {
		return diag.FromErr(err)
	}
	if _, err := r.Get(ctx, name, metav1.GetOptions{}); err != nil {
		if d.Id() == "" {
			return nil // deleting, and the object is gone
		}
		return diag.Errorf("The resource %q does not exist", name)
	}
	labels := d.Get("labels")
	if d.Id() == "" {
		labels = map[string]interface{}{} // delete: apply an empty label map, releasing the manager's labels
	}
	md := map[string]interface{}{"name": name, "labels": labels}
	if namespaced {
		md["namespace"] = namespace
	}
	body, err := json.Marshal(map[string]interface{}{"apiVersion": apiVersion, "kind": kind, "metadata": md})
	if err != nil {
		return diag.FromErr(err)
	}
	force := d.Get("force").(bool)
	_, err = r.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: d.Get("field_manager").(string), Force: &force})
	if err != nil {
		if apierrors.IsConflict(err) {
			return diag.Diagnostics{{Severity: diag.Error, Summary: "Field manager conflict",
				Detail: fmt.Sprintf(`Another client is managing a field Terraform tried to update. Set "force" to true to override: %v`, err)}}
		}
		return diag.FromErr(err)
	}
	if d.Id() == "" {
		return nil
	}
	return labelsRead(ctx, d, m)
}

func labelsDelete(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	d.SetId("")
	return labelsUpdate(ctx, d, m)
}

// kubernetes_node_taint: server-side apply of spec.taints (the configured list; an empty list on delete) under
// field_manager with force; reads back every taint of the node.

func resourceNodeTaint() *schema.Resource {
	return &schema.Resource{
		Description:   "Taints for an existing node (themelio sandbox stand-in).",
		CreateContext: taintCreate,
		ReadContext:   taintRead,
		UpdateContext: taintUpdate,
		DeleteContext: taintDelete,
		CustomizeDiff: func(ctx context.Context, rd *schema.ResourceDiff, _ interface{}) error {
			if !rd.HasChange("taint") {
				return nil
			}
			seen := map[string]int{}
			for _, t := range rd.Get("taint").([]interface{}) {
				seen[t.(map[string]interface{})["key"].(string)]++
			}
			for k, n := range seen {
				if n > 1 {
					return fmt.Errorf("taint: duplicate taint key %q: taint keys must be unique", k)
				}
			}
			return nil
		},
		Schema: map[string]*schema.Schema{
			"metadata": {
				Type: schema.TypeList, Required: true, MaxItems: 1,
				Elem: &schema.Resource{Schema: map[string]*schema.Schema{
					"name": {Type: schema.TypeString, Description: "The name of the node", Required: true, ForceNew: true},
				}},
			},
			"field_manager": {Type: schema.TypeString, Description: "Set the name of the field manager for the node taint", Optional: true, Default: defaultFieldManagerName, ValidateFunc: validation.StringIsNotWhiteSpace},
			"force":         {Type: schema.TypeBool, Description: "Force overwriting annotations that were created or edited outside of Terraform.", Optional: true},
			"taint": {
				Type: schema.TypeList, Required: true,
				Elem: &schema.Resource{Schema: map[string]*schema.Schema{
					"key":    {Type: schema.TypeString, Description: "The taint key", Required: true},
					"value":  {Type: schema.TypeString, Description: "The taint value", Required: true},
					"effect": {Type: schema.TypeString, Description: "The taint effect", Required: true},
				}},
			},
		},
	}
}

func taintID(node string, taints []interface{}) string {
	id := node
	for _, t := range taints {
		tm := t.(map[string]interface{})
		id += fmt.Sprintf(",%s=%s:%s", tm["key"], tm["value"], tm["effect"])
	}
	return id
}

func taintCreate(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	name, _ := metadataNameNamespace(d)
	d.SetId(taintID(name, d.Get("taint").([]interface{})))
	diags := taintUpdate(ctx, d, m)
	if diags.HasError() {
		d.SetId("")
	}
	return diags
}

func taintDelete(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	d.SetId("")
	return taintUpdate(ctx, d, m)
}

func taintRead(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	name, _ := metadataNameNamespace(d)
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	node, err := conn.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return diag.Diagnostics{{Severity: diag.Warning, Summary: "Node has been deleted",
				Detail: fmt.Sprintf("The underlying node %q has been deleted. You should remove it from your configuration.", name)}}
		}
		return diag.FromErr(err)
	}
	if len(node.Spec.Taints) == 0 {
		d.SetId("")
		return nil
	}
	out := make([]interface{}, len(node.Spec.Taints))
	for i, t := range node.Spec.Taints {
		out[i] = map[string]interface{}{"key": t.Key, "value": t.Value, "effect": string(t.Effect)}
	}
	d.Set("taint", out)
	return nil
}

func taintUpdate(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	name, _ := metadataNameNamespace(d)
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	if _, err := conn.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
		if d.Id() == "" && apierrors.IsNotFound(err) {
			return nil
		}
		return diag.FromErr(err)
	}
	taints := d.Get("taint").([]interface{})
	if d.Id() == "" {
		taints = []interface{}{}
	}
	body, err := json.Marshal(map[string]interface{}{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]interface{}{"name": name},
		"spec":     map[string]interface{}{"taints": taints},
	})
	if err != nil {
		return diag.FromErr(err)
	}
	force := d.Get("force").(bool)
	node, err := conn.CoreV1().Nodes().Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: d.Get("field_manager").(string), Force: &force})
	if err != nil {
		if apierrors.IsConflict(err) {
			return diag.Diagnostics{{Severity: diag.Error, Summary: "Field manager conflict",
				Detail: fmt.Sprintf(`Another client is managing a field Terraform tried to update. Set "force" to true to override: %v`, err)}}
		}
		return diag.FromErr(err)
	}
	if d.Id() == "" {
		return nil
	}
	d.SetId(taintID(node.Name, d.Get("taint").([]interface{})))
	return taintRead(ctx, d, m)
}
