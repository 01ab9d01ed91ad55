// Package images checks the image archives `make images` builds (hack/build-images.sh) against the
// Dockerfile, which stays the build for users with Docker: the same user, entrypoint and binary. Its
// test carries the build tag `cluster`: `make test-cluster` builds the archives and runs it.
package images
