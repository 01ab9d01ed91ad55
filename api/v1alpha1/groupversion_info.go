// Package v1alpha1 contains the sharestate.dev/v1alpha1 API: ShareGroup and SharePartitionState, the
// custom resources that hold Kafka share-group state (KIP-932) in Kubernetes.
// +kubebuilder:object:generate=true
// +groupName=sharestate.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "sharestate.dev", Version: "v1alpha1"}

	// SchemeBuilder adds this package's types to a scheme. It is apimachinery's, not
	// controller-runtime's, so that importing the API pulls in no controller machinery.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&ShareGroup{}, &ShareGroupList{},
		&SharePartitionState{}, &SharePartitionStateList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
