package v1alpha1

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"
)

// Object names are derived from the Kafka keys so that every persister instance and the operator find
// the same object without a lookup. A Kafka group id may be 255 characters of any unicode, in any
// case, with dots: none of that is a valid Kubernetes name as it stands. So a name is a readable,
// lower-cased prefix of the key plus a hash of the exact key, which keeps keys that differ only in
// what the prefix loses (case, punctuation, length) apart. Names stay within 63 characters so they are
// also valid label values and DNS labels. The spec keeps the real values.
const (
	groupSlugLength = 30
	hashLength      = 16 // base32 characters: 80 bits of SHA-256
)

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// SharePartitionStateName returns the name of the SharePartitionState of (groupID, topicID, partition):
// "<group prefix>-<partition>-<hash>", at most 63 characters.
func SharePartitionStateName(groupID, topicID string, partition int32) string {
	p := strconv.FormatInt(int64(partition), 10)
	return slug(groupID, groupSlugLength) + "-" + p + "-" + keyHash("sps", groupID, topicID, p)
}

// ShareGroupName returns the name of the ShareGroup of groupID: "<group prefix>-<hash>".
func ShareGroupName(groupID string) string {
	return slug(groupID, groupSlugLength) + "-" + keyHash("sg", groupID)
}

// keyHash hashes the key's parts unambiguously (each one length-prefixed) and returns hashLength
// lower-case base32 characters.
func keyHash(kind string, parts ...string) string {
	h := sha256.New()
	for _, part := range append([]string{kind}, parts...) {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return lowerBase32.EncodeToString(h.Sum(nil))[:hashLength]
}

// slug keeps the lower-cased ASCII letters and digits of s, folds every other run of characters into
// one '-', trims '-' from both ends and cuts the result to at most max characters. It returns "g" for
// a key with no ASCII letter or digit, so a name never starts with '-'.
func slug(s string, max int) string {
	var b strings.Builder
	pendingDash := false
	for _, r := range strings.ToLower(s) {
		if b.Len() >= max {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if pendingDash && b.Len() > 0 {
				if b.Len()+2 > max {
					break // no room for "-x": end on the last whole word rather than run two together
				}
				b.WriteByte('-')
			}
			pendingDash = false
			b.WriteRune(r)
			continue
		}
		pendingDash = true
	}
	if b.Len() == 0 {
		return "g"
	}
	return b.String()
}

// maxLabelValue is the longest a label value may be.
const maxLabelValue = 63

// LeaderPodLabelValue returns the LabelLeaderPod value of the pod named podName: the name itself when
// it fits a label value (pod names are DNS subdomains, whose characters label values allow), else a
// readable prefix of it and a hash of the whole name, in 63 characters.
func LeaderPodLabelValue(podName string) string {
	if len(podName) <= maxLabelValue {
		return podName
	}
	return slug(podName, maxLabelValue-hashLength-1) + "-" + keyHash("pod", podName)
}
