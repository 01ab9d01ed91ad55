// Package v1alpha1 contains the sharestate.dev/v1alpha1 API: ShareGroup and SharePartitionState, the
// custom resources that hold Kafka share-group state (KIP-932) in Kubernetes.
// +kubebuilder:object:generate=true
// +groupName=sharestate.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "sharestate.dev", Version: "v1alpha1"}

	// SchemeBuilder adds this package's types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
