package k8sprovider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/retry"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// ---- the metadata block of typed resources ----

func metadataFields(object string) map[string]*schema.Schema {
	return map[string]*schema.Schema{
		"annotations": {Type: schema.TypeMap, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}, ValidateFunc: validateAnnotations,
			Description: fmt.Sprintf("An unstructured key value map stored with the %s that may be used to store arbitrary metadata.", object)},
		"generation": {Type: schema.TypeInt, Computed: true, Description: "A sequence number representing a specific generation of the desired state."},
		"labels": {Type: schema.TypeMap, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}, ValidateFunc: validateLabels,
			Description: fmt.Sprintf("Map of string keys and values that can be used to organize and categorize (scope and select) the %s.", object)},
		"name": {Type: schema.TypeString, Optional: true, ForceNew: true, Computed: true, ValidateFunc: validateName,
			Description: fmt.Sprintf("Name of the %s, must be unique. Cannot be updated.", object)},
		"resource_version": {Type: schema.TypeString, Computed: true,
			Description: fmt.Sprintf("An opaque value that represents the internal version of this %s.", object)},
		"uid": {Type: schema.TypeString, Computed: true, Description: fmt.Sprintf("The unique in time and space value for this %s.", object)},
	}
}

func generateNameField(conflict string) *schema.Schema {
	return &schema.Schema{Type: schema.TypeString, Optional: true, ForceNew: true, ValidateFunc: validateGenerateName, ConflictsWith: []string{conflict},
		Description: "Prefix, used by the server, to generate a unique name ONLY IF the `name` field has not been provided."}
}

// metadataSchema: a cluster-scoped object's metadata (namespace).
func metadataSchema(object string) *schema.Schema {
	f := metadataFields(object)
	f["generate_name"] = generateNameField("metadata.0.name")
	f["name"].ConflictsWith = []string{"metadata.0.generate_name"}
	return &schema.Schema{Type: schema.TypeList, Required: true, MaxItems: 1, Elem: &schema.Resource{Schema: f},
		Description: fmt.Sprintf("Standard %s's metadata.", object)}
}

// namespacedMetadataSchema: a namespaced object's metadata (config map), namespace defaulting to "default".
func namespacedMetadataSchema(object string) *schema.Schema {
	f := metadataFields(object)
	f["namespace"] = &schema.Schema{Type: schema.TypeString, Optional: true, ForceNew: true, Default: "default",
		Description: fmt.Sprintf("Namespace defines the space within which name of the %s must be unique.", object)}
	f["generate_name"] = generateNameField("metadata.generate_name")
	f["generate_name"].ConflictsWith = []string{"metadata.name"}
	f["name"].ConflictsWith = []string{"metadata.generate_name"}
	return &schema.Schema{Type: schema.TypeList, Required: true, MaxItems: 1, Elem: &schema.Resource{Schema: f},
		Description: fmt.Sprintf("Standard %s's metadata.", object)}
}

func validateAnnotations(v interface{}, key string) (ws []string, es []error) {
	for k := range v.(map[string]interface{}) {
		for _, e := range utilvalidation.IsQualifiedName(strings.ToLower(k)) {
			es = append(es, fmt.Errorf("%s (%q) %s", key, k, e))
		}
	}
	return
}

func validateLabels(v interface{}, key string) (ws []string, es []error) {
	for k, val := range v.(map[string]interface{}) {
		for _, msg := range utilvalidation.IsQualifiedName(k) {
			es = append(es, fmt.Errorf("%s (%q) %s", key, k, msg))
		}
		s, ok := val.(string)
		if !ok {
			es = append(es, fmt.Errorf("%s.%s (%#v): Expected value to be string", key, k, val))
			return
		}
		for _, msg := range utilvalidation.IsValidLabelValue(s) {
			es = append(es, fmt.Errorf("%s (%q) %s", key, s, msg))
		}
	}
	return
}

func validateName(v interface{}, key string) (ws []string, es []error) {
	for _, e := range apivalidation.NameIsDNSSubdomain(v.(string), false) {
		es = append(es, fmt.Errorf("%s %s", key, e))
	}
	return
}

func validateGenerateName(v interface{}, key string) (ws []string, es []error) {
	for _, e := range apivalidation.NameIsDNSLabel(v.(string), true) {
		es = append(es, fmt.Errorf("%s %s", key, e))
	}
	return
}

func validateBase64EncodedMap(v interface{}, key string) (ws []string, es []error) {
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, []error{fmt.Errorf("%s: must be a map of strings to base64 encoded strings", key)}
	}
	for k, val := range m {
		s, ok := val.(string)
		if !ok {
			es = append(es, fmt.Errorf("%s (%q) %s: must be a non-nil base64-encoded string", k, val, k))
			continue
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			es = append(es, fmt.Errorf("%s (%q) %s: must be a base64-encoded string", k, val, k))
		}
	}
	return
}

func stringMap(m interface{}) map[string]string {
	out := map[string]string{}
	mm, _ := m.(map[string]interface{})
	for k, v := range mm {
		out[k] = v.(string)
	}
	return out
}

func expandMetadata(d *schema.ResourceData) metav1.ObjectMeta {
	md := metav1.ObjectMeta{}
	l, _ := d.Get("metadata").([]interface{})
	if len(l) == 0 || l[0] == nil {
		return md
	}
	m := l[0].(map[string]interface{})
	if v, ok := m["annotations"].(map[string]interface{}); ok && len(v) > 0 {
		md.Annotations = stringMap(v)
	}
	if v, ok := m["labels"].(map[string]interface{}); ok && len(v) > 0 {
		md.Labels = stringMap(v)
	}
	if v, ok := m["generate_name"].(string); ok {
		md.GenerateName = v
	}
	if v, ok := m["name"].(string); ok {
		md.Name = v
	}
	if v, ok := m["namespace"].(string); ok {
		md.Namespace = v
	}
	return md
}

// isInternalKey: *.kubernetes.io keys the server or controllers add (app.kubernetes.io and
// service.beta.kubernetes.io excepted) are hidden from state unless configured.
func isInternalKey(key string) bool {
	u, err := url.Parse("//" + key)
	if err != nil {
		return false
	}
	if u.Hostname() == "app.kubernetes.io" || u.Hostname() == "service.beta.kubernetes.io" {
		return false
	}
	if strings.HasSuffix(u.Hostname(), "kubernetes.io") {
		return true
	}
	return strings.Contains(key, "deprecated.daemonset.template.generation")
}

func filterKeys(m map[string]string, configured map[string]interface{}, ignore []string) {
	for k := range m {
		if _, ok := configured[k]; ok {
			continue
		}
		if isInternalKey(k) {
			delete(m, k)
			continue
		}
		for _, e := range ignore {
			if ok, _ := regexp.MatchString(e, k); ok {
				delete(m, k)
				break
			}
		}
	}
}

func flattenMetadata(md metav1.ObjectMeta, d *schema.ResourceData, meta *Meta) []interface{} {
	filterKeys(md.Annotations, d.Get("metadata.0.annotations").(map[string]interface{}), meta.IgnoreAnnotations)
	filterKeys(md.Labels, d.Get("metadata.0.labels").(map[string]interface{}), meta.IgnoreLabels)
	m := map[string]interface{}{
		"annotations":      md.Annotations,
		"generation":       md.Generation,
		"labels":           md.Labels,
		"name":             md.Name,
		"resource_version": md.ResourceVersion,
		"uid":              string(md.UID),
	}
	if md.GenerateName != "" {
		m["generate_name"] = md.GenerateName
	}
	if md.Namespace != "" {
		m["namespace"] = md.Namespace
	}
	return []interface{}{m}
}

// ---- JSON patch operations (RFC 6902) as the real provider sends on update ----

type patchOp struct {
	Op    string      `json:"op"`
	Path  string      `json:"path"`
	Value interface{} `json:"value,omitempty"`
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// diffStringMap: a whole new map is added at once; otherwise keys removed, replaced or added one by one, so keys
// that others manage stay untouched.
func diffStringMap(prefix string, oldV, newV map[string]interface{}) []patchOp {
	prefix = strings.TrimRight(prefix, "/")
	if len(oldV) == 0 {
		return []patchOp{{Op: "add", Path: prefix, Value: newV}}
	}
	var ops []patchOp
	for k := range oldV {
		if _, ok := newV[k]; !ok {
			ops = append(ops, patchOp{Op: "remove", Path: prefix + "/" + escapePointer(k)})
		}
	}
	for k, v := range newV {
		if old, ok := oldV[k].(string); ok {
			if old != v.(string) {
				ops = append(ops, patchOp{Op: "replace", Path: prefix + "/" + escapePointer(k), Value: v})
			}
			continue
		}
		ops = append(ops, patchOp{Op: "add", Path: prefix + "/" + escapePointer(k), Value: v})
	}
	return ops
}

func patchMetadata(d *schema.ResourceData) []patchOp {
	ops := []patchOp{}
	for _, f := range []string{"annotations", "labels"} {
		key := "metadata.0." + f
		if d.HasChange(key) {
			o, n := d.GetChange(key)
			ops = append(ops, diffStringMap("/metadata/"+f, o.(map[string]interface{}), n.(map[string]interface{}))...)
		}
	}
	return ops
}

// ---- kubernetes_namespace_v1 ----

func resourceNamespaceV1() *schema.Resource {
	return &schema.Resource{
		Description:   "A Kubernetes namespace (themelio sandbox stand-in).",
		CreateContext: namespaceCreate,
		ReadContext:   namespaceRead,
		UpdateContext: namespaceUpdate,
		DeleteContext: namespaceDelete,
		Importer:      &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		Schema: map[string]*schema.Schema{
			"metadata": metadataSchema("namespace"),
			"wait_for_default_service_account": {Type: schema.TypeBool, Optional: true, Default: false,
				Description: "Terraform will wait for the default service account to be created."},
		},
		Timeouts: &schema.ResourceTimeout{Delete: schema.DefaultTimeout(5 * time.Minute)},
	}
}

func namespaceCreate(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	ns := corev1.Namespace{ObjectMeta: expandMetadata(d)}
	out, err := conn.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{})
	if err != nil {
		return diag.FromErr(err)
	}
	d.SetId(out.Name)
	if d.Get("wait_for_default_service_account").(bool) {
		err = retry.RetryContext(ctx, d.Timeout(schema.TimeoutCreate), func() *retry.RetryError {
			_, err := conn.CoreV1().ServiceAccounts(out.Name).Get(ctx, "default", metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					return retry.RetryableError(err)
				}
				return retry.NonRetryableError(err)
			}
			return nil
		})
		if err != nil {
			return diag.FromErr(err)
		}
	}
	return namespaceRead(ctx, d, m)
}

func namespaceRead(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	ns, err := conn.CoreV1().Namespaces().Get(ctx, d.Id(), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			d.SetId("")
			return nil
		}
		return diag.FromErr(err)
	}
	if err := d.Set("metadata", flattenMetadata(ns.ObjectMeta, d, m.(*Meta))); err != nil {
		return diag.FromErr(err)
	}
	return nil
}

func namespaceUpdate(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	data, err := json.Marshal(patchMetadata(d))
	if err != nil {
		return diag.Errorf("Failed to marshal update operations: %s", err)
	}
	out, err := conn.CoreV1().Namespaces().Patch(ctx, d.Id(), types.JSONPatchType, data, metav1.PatchOptions{})
	if err != nil {
		return diag.FromErr(err)
	}
	d.SetId(out.Name)
	return namespaceRead(ctx, d, m)
}

func namespaceDelete(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	name := d.Id()
	if err := conn.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return diag.FromErr(err)
	}
	conf := &retry.StateChangeConf{
		Target:  []string{},
		Pending: []string{"Terminating"},
		Timeout: d.Timeout(schema.TimeoutDelete),
		Refresh: func() (interface{}, string, error) {
			out, err := conn.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					return nil, "", nil
				}
				return out, "Error", err
			}
			return out, string(out.Status.Phase), nil
		},
	}
	if _, err := conf.WaitForStateContext(ctx); err != nil {
		return diag.FromErr(err)
	}
	log.Printf("[INFO] Namespace %s deleted", name)
	d.SetId("")
	return nil
}

// ---- kubernetes_config_map_v1 ----

func resourceConfigMapV1() *schema.Resource {
	return &schema.Resource{
		Description:   "A Kubernetes config map (themelio sandbox stand-in).",
		CreateContext: configMapCreate,
		ReadContext:   configMapRead,
		UpdateContext: configMapUpdate,
		DeleteContext: configMapDelete,
		Importer:      &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		CustomizeDiff: func(ctx context.Context, diff *schema.ResourceDiff, _ interface{}) error {
			if diff.Id() == "" {
				return nil
			}
			immutable, _ := diff.GetChange("immutable")
			if immutable.(bool) {
				for _, f := range []string{"data", "binary_data", "immutable"} {
					if diff.HasChange(f) {
						diff.ForceNew(f)
					}
				}
			}
			return nil
		},
		Schema: map[string]*schema.Schema{
			"metadata":    namespacedMetadataSchema("config map"),
			"binary_data": {Type: schema.TypeMap, Optional: true, ValidateFunc: validateBase64EncodedMap, Description: "BinaryData contains the binary data (base64-encoded)."},
			"data":        {Type: schema.TypeMap, Optional: true, Description: "Data contains the configuration data."},
			"immutable":   {Type: schema.TypeBool, Optional: true, Description: "Immutable, if set to true, ensures that data stored in the ConfigMap cannot be updated."},
		},
	}
}

func splitNamespacedID(id string) (string, string, error) {
	parts := strings.Split(id, "/")
	if len(parts) != 2 {
		return "", "", fmt.Errorf("Unexpected ID format (%q), expected %q.", id, "namespace/name")
	}
	return parts[0], parts[1], nil
}

func configMapCreate(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	md := expandMetadata(d)
	binary := map[string][]byte{}
	for k, v := range d.Get("binary_data").(map[string]interface{}) {
		if b, err := base64.StdEncoding.DecodeString(v.(string)); err == nil {
			binary[k] = b
		}
	}
	immutable := d.Get("immutable").(bool)
	cm := corev1.ConfigMap{ObjectMeta: md, BinaryData: binary, Data: stringMap(d.Get("data")), Immutable: &immutable}
	out, err := conn.CoreV1().ConfigMaps(md.Namespace).Create(ctx, &cm, metav1.CreateOptions{})
	if err != nil {
		return diag.FromErr(err)
	}
	d.SetId(out.Namespace + "/" + out.Name)
	return configMapRead(ctx, d, m)
}

func configMapRead(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	namespace, name, err := splitNamespacedID(d.Id())
	if err != nil {
		return diag.FromErr(err)
	}
	cm, err := conn.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			d.SetId("")
			return nil
		}
		return diag.FromErr(err)
	}
	if err := d.Set("metadata", flattenMetadata(cm.ObjectMeta, d, m.(*Meta))); err != nil {
		return diag.FromErr(err)
	}
	binary := map[string]string{}
	for k, v := range cm.BinaryData {
		binary[k] = base64.StdEncoding.EncodeToString(v)
	}
	d.Set("binary_data", binary)
	d.Set("data", cm.Data)
	d.Set("immutable", cm.Immutable)
	return nil
}

func configMapUpdate(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	namespace, name, err := splitNamespacedID(d.Id())
	if err != nil {
		return diag.FromErr(err)
	}
	ops := patchMetadata(d)
	if d.HasChange("binary_data") {
		o, n := d.GetChange("binary_data")
		ops = append(ops, diffStringMap("/binaryData/", o.(map[string]interface{}), n.(map[string]interface{}))...)
	}
	if d.HasChange("data") {
		o, n := d.GetChange("data")
		ops = append(ops, diffStringMap("/data/", o.(map[string]interface{}), n.(map[string]interface{}))...)
	}
	if d.HasChange("immutable") {
		v := d.Get("immutable").(bool)
		ops = append(ops, patchOp{Op: "replace", Path: "/immutable", Value: &v})
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return diag.Errorf("Failed to marshal update operations: %s", err)
	}
	out, err := conn.CoreV1().ConfigMaps(namespace).Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{})
	if err != nil {
		return diag.Errorf("Failed to update Config Map: %s", err)
	}
	d.SetId(out.Namespace + "/" + out.Name)
	return configMapRead(ctx, d, m)
}

func configMapDelete(ctx context.Context, d *schema.ResourceData, m interface{}) diag.Diagnostics {
	conn, err := m.(*Meta).Main()
	if err != nil {
		return diag.FromErr(err)
	}
	namespace, name, err := splitNamespacedID(d.Id())
	if err != nil {
		return diag.FromErr(err)
	}
	if err := conn.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return diag.FromErr(err)
	}
	d.SetId("")
	return nil
}
