// deploy is a module of its own so that latch's go.mod does not take the
// libraries that build the OCI image (go-containerregistry) and check the
// Kubernetes manifests (kustomize, k8s.io/api): they are build tools, not
// part of latch or of its client library. The Makefile vets, staticchecks,
// tidy-checks and tests it (make deploy-check), and make image runs it.
module github.com/latchd/latch/deploy

go 1.26.8

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
