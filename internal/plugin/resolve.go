package plugin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// findGroup finds the ShareGroup arg names: the object of that name in the session's namespace, else
// the one whose Kafka group id (spec.groupId) is arg. With allNamespaces it looks in every namespace,
// by either, and insists on a single match.
func (s *session) findGroup(ctx context.Context, arg string, allNamespaces bool) (*sharestatev1.ShareGroup, error) {
	if arg == "" {
		return nil, errors.New("a group name or group id is required")
	}
	// A group id that cannot be an object name (upper case, '/', 255 characters) is only a group id.
	if !allNamespaces && len(validation.IsDNS1123Subdomain(arg)) == 0 {
		sg := &sharestatev1.ShareGroup{}
		err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: arg}, sg)
		if err == nil {
			return sg, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, apiError(err, "reading ShareGroup %s/%s", s.namespace, arg)
		}
	}
	var list sharestatev1.ShareGroupList
	var opts []client.ListOption
	where := fmt.Sprintf("namespace %q", s.namespace)
	if allNamespaces {
		where = "any namespace"
	} else {
		opts = append(opts, client.InNamespace(s.namespace))
	}
	if err := s.client.List(ctx, &list, opts...); err != nil {
		return nil, apiError(err, "listing ShareGroups in %s", where)
	}
	var matches []*sharestatev1.ShareGroup
	for i := range list.Items {
		g := &list.Items[i]
		if string(g.Spec.GroupID) == arg || (allNamespaces && g.Name == arg) {
			matches = append(matches, g)
		}
	}
	switch len(matches) {
	case 0:
		return nil, fmt.Errorf("no ShareGroup named %q or with group id %q in %s", arg, arg, where)
	case 1:
		return matches[0], nil
	}
	names := make([]string, len(matches))
	for i, g := range matches {
		names[i] = fmt.Sprintf("%s/%s (group id %q)", g.Namespace, g.Name, g.Spec.GroupID)
	}
	return nil, fmt.Errorf("%q matches %d ShareGroups: %s; name one by its object name and namespace",
		arg, len(matches), strings.Join(names, ", "))
}

// resolveTopic turns a topic argument into a topic id: a Kafka topic id as it stands, else the name
// of a topic the group declares.
func resolveTopic(sg *sharestatev1.ShareGroup, arg string) (sharestatev1.TopicID, error) {
	if id, err := sharestate.ParseTopicID(arg); err == nil {
		if id.IsZero() {
			return "", fmt.Errorf("topic id %q is the zero Uuid, which names no topic", arg)
		}
		return sharestatev1.TopicID(id.String()), nil
	}
	var declared []string
	for _, t := range sg.Spec.Topics {
		if t.Name != "" && t.Name == arg {
			return t.TopicID, nil
		}
		declared = append(declared, topicLabel(t.Name, t.TopicID))
	}
	known := "it declares no topics"
	if len(declared) > 0 {
		known = "it declares " + strings.Join(declared, ", ")
	}
	return "", fmt.Errorf("topic %q is neither a Kafka topic id (22 characters of URL-safe base64) nor the name of a topic of group %q: %s",
		arg, sg.Spec.GroupID, known)
}

// topicName is the name the group declares for a topic id, or "".
func topicName(sg *sharestatev1.ShareGroup, id sharestatev1.TopicID) string {
	for _, t := range sg.Spec.Topics {
		if t.TopicID == id {
			return t.Name
		}
	}
	return ""
}

// topicLabel shows a topic as "name (id)", or the id alone when it has no name.
func topicLabel(name string, id sharestatev1.TopicID) string {
	if name == "" {
		return string(id)
	}
	return fmt.Sprintf("%s (%s)", name, id)
}

// listPartitions lists the group's SharePartitionStates (by the label the operator and the persister
// set), sorted by topic and partition.
func (s *session) listPartitions(ctx context.Context, sg *sharestatev1.ShareGroup) ([]sharestatev1.SharePartitionState, error) {
	var list sharestatev1.SharePartitionStateList
	if err := s.client.List(ctx, &list, client.InNamespace(sg.Namespace), client.MatchingLabels{sharestatev1.LabelShareGroup: sg.Name}); err != nil {
		return nil, apiError(err, "listing the SharePartitionStates of %s/%s", sg.Namespace, sg.Name)
	}
	items := list.Items[:0]
	for _, p := range list.Items {
		if p.Spec.GroupID == sg.Spec.GroupID {
			items = append(items, p)
		}
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].Spec.TopicID != items[j].Spec.TopicID {
			return items[i].Spec.TopicID < items[j].Spec.TopicID
		}
		return items[i].Spec.Partition < items[j].Spec.Partition
	})
	return items, nil
}
