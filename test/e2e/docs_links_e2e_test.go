//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The pages a user reads, whose references to other pages and files are checked.
var checkedPages = []string{"README.md", "charts/sharestate-operator/README.md", "docs/*.md"}

var (
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// A page named in code, as a citation: `semantics.md`, `docs/operations.md`.
	namedPage = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.md)`")
)

// TestDocsReferencesResolve: every link of the user's pages to a file of the repository names one that
// exists, every link to a section names a heading of its page, and every page named in code as a
// citation exists (the compatibility page cited a share-state.md that was never in the repository).
func TestDocsReferencesResolve(t *testing.T) {
	root := testenv.RepoRoot()
	var pages []string
	for _, pattern := range checkedPages {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(matches) == 0 {
			t.Fatalf("no page matches %s: %v", pattern, err)
		}
		pages = append(pages, matches...)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if anchors[page] == nil {
			anchors[page] = headingAnchors(t, page)
		}
		return anchors[page]
	}
	for _, page := range pages {
		rel, _ := filepath.Rel(root, page)
		for _, line := range proseLines(t, page) {
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				if err := checkLink(page, m[1], anchorsOf); err != nil {
					t.Errorf("%s: link %s: %v", rel, m[1], err)
				}
			}
			for _, m := range namedPage.FindAllStringSubmatch(line, -1) {
				if !pageExists(root, page, m[1]) {
					t.Errorf("%s: names %s, which is not in the repository", rel, m[1])
				}
			}
		}
	}
}

// checkLink checks a link of page: one to another site is not followed; one to a file must name a file
// that exists, and a section of a page one of its headings.
func checkLink(page, target string, anchorsOf func(string) map[string]bool) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	path, anchor, _ := strings.Cut(target, "#")
	linked := page
	if path != "" {
		linked = filepath.Join(filepath.Dir(page), path)
		if _, err := os.Stat(linked); err != nil {
			return fmt.Errorf("no such file (%w)", err)
		}
	}
	if anchor != "" && strings.HasSuffix(linked, ".md") && !anchorsOf(linked)[anchor] {
		return fmt.Errorf("no heading of %s has the anchor #%s", filepath.Base(linked), anchor)
	}
	return nil
}

// pageExists says whether name, a page named in code on page, is beside it, or at that path from the
// repository's root or its docs/.
func pageExists(root, page, name string) bool {
	for _, dir := range []string{filepath.Dir(page), root, filepath.Join(root, "docs")} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// proseLines returns the lines of page outside its fenced code blocks.
func proseLines(t *testing.T, page string) []string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines = append(lines, line)
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the headings of page: the heading's text in lower
// case, without the characters that are neither letters, digits, spaces, dashes nor underscores, each
// space a dash, and "-1", "-2"... after the second and later headings of the same anchor.
func headingAnchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(t, page) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", anchor, n)] = true
		} else {
			anchors[anchor] = true
		}
		seen[anchor]++
	}
	return anchors
}

// The overview is the page a newcomer reads in minutes: at most 1,000 words.
func TestOverviewIsOnePage(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "overview.md"))
	if err != nil {
		t.Fatal(err)
	}
	if words := len(strings.Fields(string(page))); words > 1000 {
		t.Fatalf("docs/overview.md has %d words, more than 1,000", words)
	}
}
