//go:build !unix

package testenv

// keepFuzzPipesFromChildren is needed only where children inherit descriptors (see the unix file).
func keepFuzzPipesFromChildren() {}
