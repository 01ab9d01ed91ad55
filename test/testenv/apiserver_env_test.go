package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckAPIServerEnv(t *testing.T) {
	if err := CheckAPIServerEnv([]string{"GOGC=off", "GOMEMLIMIT=8GiB", "EMPTY=", "X_1=a=b"}); err != nil {
		t.Errorf("good assignments refused: %v", err)
	}
	for _, bad := range []string{"GOGC", "=off", "1X=y", "GO GC=off", "", "X-Y=1"} {
		if err := CheckAPIServerEnv([]string{"GOGC=off", bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The wrapper runs its binary with the variables added and its own arguments passed on, whatever
// quotes or spaces they hold.
func TestAPIServerWrapperAddsTheEnvironment(t *testing.T) {
	envBinary, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env(1) here")
	}
	script := filepath.Join(t.TempDir(), "wrapper")
	vars := []string{"SHARESTATE_A=it's here", `SHARESTATE_B=$HOME "quoted"`}
	if err := os.WriteFile(script, []byte(apiserverWrapper(envBinary, vars)), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script, "SHARESTATE_C=from the arguments").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, want := range append(vars, "SHARESTATE_C=from the arguments") {
		if !slices.Contains(got, want) {
			t.Errorf("the wrapped process's environment lacks %q:\n%s", want, out)
		}
	}
}
