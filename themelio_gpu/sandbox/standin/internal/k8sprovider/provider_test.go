package k8sprovider

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProviderSchemaIsValid(t *testing.T) {
	if err := Provider().InternalValidate(); err != nil {
		t.Fatal(err)
	}
}

// The labels a field manager owns are read from its managedFields entry (the last entry of that manager wins).
func TestOwnedLabels(t *testing.T) {
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kubelet", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:kubernetes.io/os":{}}}}`)}},
		{Manager: "themelio", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:accelerator":{}}}}`)}},
		{Manager: "themelio", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:taints":{}}}`)}},
	}
	owned, err := ownedMetadataKeys(entries, "themelio", "f:labels")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := owned["f:accelerator"]; !ok {
		t.Errorf("owned %v", owned)
	}
	if _, ok := owned["f:kubernetes.io/os"]; ok {
		t.Errorf("kubelet's label counted as owned: %v", owned)
	}
}
