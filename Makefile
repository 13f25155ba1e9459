# make test: everything CI runs (.ci/run). Needs Go and, for deps, Debian's apt.

GO       ?= go
FUZZTIME ?= 10s

# Debian packages the tests need (yrmcds, memcached and libmemcached-tools
# are the memcached front end's real peers and clients; chromium runs the
# admin status page in internal/admin's browser test; python3-pymemcache is a
# Python client, seen by /usr/bin/python3; redis-server is the Redis front
# end's reference, redis-tools (redis-cli, redis-benchmark) and python3-redis
# its clients; nftables (nft) cuts the Jepsen test's nodes apart, inside a
# network namespace the test creates; zookeeper is the ZooKeeper front end's
# reference (standalone, and its zkCli), python3-kazoo its Python client,
# whose own test suite runs with python3-pytest and python3-mock,
# libcurator-recipes-java its Java client (Curator's recipes, pulling the
# framework, the client and the ZooKeeper jars), default-jdk-headless the
# javac that compiles the Curator harness; prometheus gives promtool, which
# checks and tests contrib/mixin's alert rules, and jq turns its dashboard's
# queries into rules for promtool to parse; groff-base (groff) renders the
# man page in cmd/latch's TestManPage; systemd gives systemd-analyze,
# systemd-sysusers and systemd-tmpfiles, which check contrib/systemd/ in
# cmd/latch's TestSystemd* tests, with no systemd running; minisign
# signs and verifies make release's SHA256SUMS, zip makes its windows
# archive, lintian and rpmlint check its deb and rpm packages, and rpm
# (rpm -qpl, rpm --root) and dpkg install them in cmd/latch's TestPackages
# and TestInstallFromPackage). "make deps" installs the missing ones.
DEB_PKGS ?= minisign zip lintian rpm rpmlint groff-base protobuf-compiler chromium yrmcds memcached libmemcached-tools python3-pymemcache redis-server redis-tools python3-redis nftables zookeeper python3-kazoo python3-pytest python3-mock libcurator-recipes-java default-jdk-headless prometheus jq systemd

# Tools installed with "go install" into .bin/, pinned.
STATICCHECK_VERSION ?= v0.8.2
TOOLS       := $(CURDIR)/.bin
STATICCHECK := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)/staticcheck
# make release's: the SBOM generator and the deb/rpm packager.
CYCLONEDX_VERSION ?= v1.10.0
CYCLONEDX := $(TOOLS)/cyclonedx-gomod-$(CYCLONEDX_VERSION)/cyclonedx-gomod
NFPM_VERSION ?= v2.45.2
NFPM := $(TOOLS)/nfpm-$(NFPM_VERSION)/nfpm

# protoc-gen-go is pinned to the google.golang.org/protobuf runtime in go.mod,
# so that generated code and runtime always match.
PROTOBUF_VERSION = $(shell $(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)
PROTOC_GEN_GO    = $(TOOLS)/protoc-gen-go-$(PROTOBUF_VERSION)/protoc-gen-go

SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: test deps fmt vet cross staticcheck unit powerloss fuzz proto jepsen mixin man release

test: deps fmt vet cross staticcheck deploy-check unit mixin powerloss fuzz jepsen

# npm clients of the memcached, Redis and ZooKeeper front ends' tests,
# pinned by the lock files in NPM_DIR, REDIS_NPM_DIR and ZK_NPM_DIR;
# installed with the machine's node and npm.
NPM_DIR := internal/memcache/testdata/npm
REDIS_NPM_DIR := internal/resp/testdata/npm
ZK_NPM_DIR := internal/zookeeper/testdata/npm

# Install the packages of DEB_PKGS that are not installed yet (nothing when
# DEB_PKGS is empty or every package is there), then the npm clients.
deps:
	@:
ifneq ($(strip $(DEB_PKGS)),)
	@missing=; \
	for p in $(DEB_PKGS); do \
		dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing$$missing"; \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends $$missing; \
	fi
endif
	@test -d $(NPM_DIR)/node_modules/memcached || npm ci --prefix $(NPM_DIR) --no-audit --no-fund
	@test -d $(REDIS_NPM_DIR)/node_modules/redis-semaphore || npm ci --prefix $(REDIS_NPM_DIR) --no-audit --no-fund
	@test -d $(ZK_NPM_DIR)/node_modules/node-zookeeper-client || npm ci --prefix $(ZK_NPM_DIR) --no-audit --no-fund

# Fail on a file gofmt would change and on a go.mod or go.sum that
# "go mod tidy" would change.
fmt:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "fmt: not gofmt'ed:"; echo "$$unformatted"; exit 1; fi
	$(GO) mod tidy -diff

vet:
	$(GO) vet ./...

# Build every package for each GOOS/GOARCH of CROSS_PLATFORMS, without cgo,
# so that code for one system (syscalls, build tags) does not break the
# others. go build of many packages writes no binaries: this only compiles.
CROSS_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64 windows/amd64
cross:
	@set -e; \
	for p in $(CROSS_PLATFORMS); do \
		echo "cross: $$p"; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./...; \
	done

$(STATICCHECK):
	GOBIN=$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

$(CYCLONEDX):
	GOBIN=$(dir $@) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_VERSION)

$(NFPM):
	GOBIN=$(dir $@) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

# The release, into DIST (scripts/release.sh says what it holds): static,
# reproducible binaries for RELEASE_PLATFORMS in tar.gz archives (zip for
# windows), their SBOMs, deb and rpm packages for the linux ones,
# SHA256SUMS, and its minisign signature when RELEASE_SIGN_KEY names a
# secret key (RELEASE_SIGN_PASSWORD_FILE its password). VERSION: the v*
# tag at HEAD, else a pseudo-version; SOURCE_DATE_EPOCH: the commit's
# time (both taken from the environment or make's command line when set
# there). cmd/latch's TestRelease builds it twice and compares.
DIST ?= dist
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64 freebsd/arm64 windows/amd64
release: $(CYCLONEDX) $(NFPM)
	GO=$(GO) CYCLONEDX=$(CYCLONEDX) NFPM=$(NFPM) DIST=$(DIST) RELEASE_PLATFORMS="$(RELEASE_PLATFORMS)" scripts/release.sh

# The memcached, Redis and dlock front ends' suites run on event loops (a
# node in memory's way), then again on a goroutine per connection.
# cmd/latch's release tests run make release, whose tools are installed
# first, outside go test's time limit.
unit: $(CYCLONEDX) $(NFPM)
	$(GO) test -race ./...
	LATCH_MEMCACHE_LOOPS=-1 LATCH_REDIS_LOOPS=-1 LATCH_DLOCK_LOOPS=-1 $(GO) test -race ./internal/memcache ./internal/resp ./internal/dlock

# The alert rules and dashboard of contrib/mixin: promtool (Debian's
# prometheus) checks the rules and runs their unit tests; every query of
# the dashboard, made a recording rule by jq, must parse; and every metric
# either names must be in latch's registry (the Go test).
MIXIN := contrib/mixin
mixin: deps
	promtool check rules $(MIXIN)/alerts.yaml
	promtool test rules $(MIXIN)/tests.yaml
	@rules=$$(mktemp --suffix=.json) && trap 'rm -f "$$rules"' EXIT && \
	jq '{groups: [{name: "dashboard", rules: ([.panels[] | .targets[]? | .expr | gsub("\\$$__rate_interval"; "5m") | gsub("\\$$(job|instance)"; ".+")] | to_entries | map({record: "dashboard:expr_\(.key)", expr: .value}))}]}' \
		$(MIXIN)/dashboard.json >"$$rules" && \
	promtool check rules "$$rules"
	$(GO) test -count=1 -run '^TestMixin' ./internal/server

# The power-loss test (internal/replica/raftrep/powerloss_test.go):
# in-process clusters on crashable file systems under kills, power loss,
# disk errors and partitions, POWERLOSS_SEEDS seeds, without the race
# detector (unit runs a few with it), and its control, which must be
# caught. POWERLOSS_SEEDS=5000 is the long form; a failing seed is
# replayed with LATCH_POWERLOSS_SEED=N (LATCH_POWERLOSS_LOG=DIR keeps its
# log).
POWERLOSS_SEEDS ?= 200
powerloss:
	LATCH_POWERLOSS_SEEDS=$(POWERLOSS_SEEDS) $(GO) test -count=1 -timeout 60m -run '^TestPowerLoss' ./internal/replica/raftrep

# The Jepsen-style test (docs/jepsen.md): a real 3-node cluster in a network
# namespace under kills, pauses, partitions and power losses (each node's
# data dir on a FUSE file system that can lose what was not synced), for
# JEPSEN_TIME (a Go duration, 60s by default), its history checked. Needs
# root, nft and /dev/fuse (mounted without fusermount). The
# last line is the summary; the exit status is non-zero when the history is
# not safe. JEPSEN_CONTROL=1 runs the control (fencing off), which must be
# caught; JEPSEN_SEED replays a schedule; JEPSEN_OUT keeps the files there.
JEPSEN_TEST := $(TOOLS)/jepsen.test
jepsen: deps
	$(GO) test -c -o $(JEPSEN_TEST) ./internal/latchtest/jepsen
	cd internal/latchtest/jepsen && JEPSEN=1 $(JEPSEN_TEST) -test.run '^TestJepsen$$' -test.timeout 0

# Run every fuzz target of the module for FUZZTIME each, then the deploy/
# module's (the Kubernetes variable expansion). A package is
# searched when one of its test files defines a Fuzz function; go test -list
# names its targets. scripts/fuzz-target.sh runs one (and tells a Go fuzz
# coordinator race from a failure).
fuzz:
	@set -e; \
	for pd in $$($(GO) list -f '{{.ImportPath}}={{.Dir}}' ./...); do \
		pkg=$${pd%%=*}; dir=$${pd#*=}; \
		grep -qs '^func Fuzz' "$$dir"/*_test.go || continue; \
		for name in $$($(GO) test -list '^Fuzz' "$$pkg" | grep '^Fuzz'); do \
			echo "fuzz: $$pkg $$name for $(FUZZTIME)"; \
			GO=$(GO) scripts/fuzz-target.sh "$$pkg" "$$dir" "$$name" $(FUZZTIME); \
		done; \
	done
	@echo "fuzz: $(DEPLOY)/kube FuzzExpand for $(FUZZTIME)"
	@cd $(DEPLOY) && GO=$(GO) ../scripts/fuzz-target.sh ./kube kube FuzzExpand $(FUZZTIME)

# Regenerate dlockpb/ from proto/dlock.proto (dlockpb's drift test checks
# that this was done). Installs protoc (Debian's protobuf-compiler, the
# version the committed code names) and protoc-gen-go when missing.
proto: deps
	@test -x "$(PROTOC_GEN_GO)" || GOBIN=$(dir $(PROTOC_GEN_GO)) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOBUF_VERSION)
	protoc -I proto --plugin=protoc-gen-go=$(PROTOC_GEN_GO) --go_out=. --go_opt=module=github.com/latchd/latch dlock.proto

# Regenerate contrib/man/latch.1, the man page "latch man" prints (made
# from the commands' help texts and flags; cmd/latch's TestManPage checks
# that this was done).
man:
	$(GO) run ./cmd/latch man > contrib/man/latch.1

.PHONY: image deploy-check

# runc runs the OCI image (make image) in cmd/latch's TestImage as a
# container, with no daemon; podman loads its tarball there, as
# docs/install.md tells a user to; ca-certificates is the CA bundle the
# image holds. (deps, above, installs them.)
DEB_PKGS += runc podman ca-certificates

# deploy/ is a module of its own (the OCI image builder and the Kubernetes
# manifests' checks, with their libraries kept out of latch's go.mod):
# the root's fmt, vet and staticcheck do not descend into it, so its tidy,
# vet, staticcheck and tests run here. Then cmd/latch's TestImage (make
# image, run with runc, as root) and TestKubernetes (contrib/kubernetes
# checked, its three pods run in network namespaces, as root), which go
# test ./... skips without LATCH_DEPLOY_TESTS=1.
DEPLOY := deploy
deploy-check: deps $(STATICCHECK)
	cd $(DEPLOY) && $(GO) mod tidy -diff
	cd $(DEPLOY) && $(GO) vet ./...
	cd $(DEPLOY) && $(STATICCHECK) ./...
	cd $(DEPLOY) && $(GO) test -count=1 ./...
	LATCH_DEPLOY_TESTS=1 $(GO) test -count=1 -timeout 20m -run '^(TestImage|TestKubernetes)$$' ./cmd/latch

# The OCI image (docs/install.md, "Container image"), built without a
# daemon by deploy/cmd/latch-image: FROM scratch, the static latch binary
# of each of IMAGE_PLATFORMS and the build machine's CA bundle, into
# $(DIST)/latch-image (an OCI layout of a multi-platform index) and
# $(DIST)/latch-image-linux-ARCH.tar (docker-archive, for docker load and
# podman load), tagged latch:VERSION, written beside whatever DIST holds
# (make release empties DIST: run it first when you want both).
# scripts/release.sh image builds it: the binaries are the release's
# (the same build, the same bytes), and every time in the image is the
# commit's date, so one commit gives one digest (cmd/latch's TestImage
# builds it twice). VERSION and SOURCE_DATE_EPOCH as for make release.
# The repository names no license yet: IMAGE_LICENSES is an SPDX
# reference that says so, until it does.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_LICENSES  ?= LicenseRef-latch-unlicensed
image:
	GO=$(GO) DIST=$(DIST) IMAGE_PLATFORMS="$(IMAGE_PLATFORMS)" IMAGE_LICENSES="$(IMAGE_LICENSES)" scripts/release.sh image
