package cluster

import "testing"

// A record written before the kubelet started has no CgroupRoot: its sweep must touch no cgroup,
// since a walk from the controllers' roots would remove the machine's own empty cgroups.
func TestNoCgroupRootSweepsNothing(t *testing.T) {
	for _, root := range []string{"", "/", ".", "../x"} {
		if dirs := (&record{CgroupRoot: root}).cgroupDirs(); dirs != nil {
			t.Errorf("CgroupRoot %q sweeps %d cgroups, want none", root, len(dirs))
		}
	}
}
