# make test: everything CI runs (.ci/run). Needs Go and, for deps, Debian's apt.

GO       ?= go
FUZZTIME ?= 10s

# Debian packages the tests need (real peers such as yrmcds and memcached
# arrive with their front ends). "make deps" installs the missing ones.
DEB_PKGS ?=

# Tools installed with "go install" into .bin/, pinned.
STATICCHECK_VERSION ?= v0.8.2
TOOLS       := $(CURDIR)/.bin
STATICCHECK := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)/staticcheck

SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: test deps vet staticcheck unit fuzz

test: deps vet staticcheck unit fuzz

# Install the packages of DEB_PKGS that are not installed yet; nothing when
# DEB_PKGS is empty or every package is there.
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

vet:
	$(GO) vet ./...

$(STATICCHECK):
	GOBIN=$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

unit:
	$(GO) test -race ./...

# Run every fuzz target of the module for FUZZTIME each. A package is
# searched when one of its test files defines a Fuzz function; go test -list
# names its targets.
fuzz:
	@set -e; \
	for pd in $$($(GO) list -f '{{.ImportPath}}={{.Dir}}' ./...); do \
		pkg=$${pd%%=*}; dir=$${pd#*=}; \
		grep -qs '^func Fuzz' "$$dir"/*_test.go || continue; \
		for name in $$($(GO) test -list '^Fuzz' "$$pkg" | grep '^Fuzz'); do \
			echo "fuzz: $$pkg $$name for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done
