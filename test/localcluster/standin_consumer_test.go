package localcluster

import (
	"reflect"
	"testing"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/leader"
)

func TestAckBatches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records []leader.AcquiredRecords
		want    []leader.AckBatch
	}{
		{name: "nothing acquired"},
		{name: "first deliveries: one released, one rejected, one never acknowledged",
			records: []leader.AcquiredRecords{{FirstOffset: 5, LastOffset: 22, DeliveryCount: 1}},
			want: []leader.AckBatch{{FirstOffset: 5, LastOffset: 6, Type: leader.AckAccept}, {FirstOffset: 7, LastOffset: 7, Type: leader.AckRelease},
				{FirstOffset: 8, LastOffset: 12, Type: leader.AckAccept}, {FirstOffset: 13, LastOffset: 13, Type: leader.AckReject},
				{FirstOffset: 14, LastOffset: 16, Type: leader.AckAccept}, {FirstOffset: 17, LastOffset: 17, Type: leader.AckRelease},
				{FirstOffset: 18, LastOffset: 20, Type: leader.AckAccept}, {FirstOffset: 22, LastOffset: 22, Type: leader.AckAccept}}},
		{name: "a released record's second delivery is accepted, and joins its neighbours' batch",
			records: []leader.AcquiredRecords{{FirstOffset: 7, LastOffset: 7, DeliveryCount: 2}, {FirstOffset: 8, LastOffset: 9, DeliveryCount: 1}},
			want:    []leader.AckBatch{{FirstOffset: 7, LastOffset: 9, Type: leader.AckAccept}}},
		{name: "a failing record is never acknowledged, however often delivered",
			records: []leader.AcquiredRecords{{FirstOffset: 71, LastOffset: 71, DeliveryCount: 4}},
			want:    nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ackBatches(tc.records); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ackBatches(%+v)\n = %+v\nwant %+v", tc.records, got, tc.want)
			}
		})
	}
}
