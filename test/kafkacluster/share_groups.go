package kafkacluster

import (
	"strconv"
	"strings"
)

// StartOffsets reads the table kafka-share-groups.sh --describe --offsets prints: the start offset
// of each partition of group, by topic name. Lines of other groups, and lines that are not the
// table's, are left out.
func StartOffsets(out, group string) map[string]map[int32]int64 {
	offsets := map[string]map[int32]int64{}
	var header []string
	for line := range strings.Lines(out) {
		fields := strings.Fields(line)
		if len(fields) > 0 && fields[0] == "GROUP" {
			header = fields
			continue
		}
		if header == nil || len(fields) != len(header) || fields[0] != group {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = fields[i]
		}
		p, err1 := strconv.ParseInt(row["PARTITION"], 10, 32)
		o, err2 := strconv.ParseInt(row["START-OFFSET"], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if offsets[row["TOPIC"]] == nil {
			offsets[row["TOPIC"]] = map[int32]int64{}
		}
		offsets[row["TOPIC"]][int32(p)] = o
	}
	return offsets
}
