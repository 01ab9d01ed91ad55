package testenv

import (
	"fmt"
	"os"
	"strings"
)

// DocBlock returns the fenced code block that follows the line `<!-- docs-test: name -->` in a page:
// the commands a test runs as the page gives them.
func DocBlock(page, name string) (string, error) {
	data, err := os.ReadFile(page)
	if err != nil {
		return "", err
	}
	marker := "<!-- docs-test: " + name + " -->"
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) != marker {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			return "", fmt.Errorf("%s: %s is not followed by a fenced block", page, marker)
		}
		var block []string
		for _, l := range lines[i+2:] {
			if strings.HasPrefix(l, "```") {
				return strings.Join(block, "\n"), nil
			}
			block = append(block, l)
		}
		return "", fmt.Errorf("%s: the block after %s does not end", page, marker)
	}
	return "", fmt.Errorf("%s has no block marked %s", page, marker)
}
