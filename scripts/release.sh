#!/bin/sh
# scripts/release.sh: "make release" and "make image". The one place that
# says how latch's shipped binaries are built: both build them with the
# function build below, from the commit checked out, so that the image
# holds, for its platforms, the very bytes of the release's binaries.
#
# scripts/release.sh (or: scripts/release.sh release) builds the release
# into DIST (dist/ by default), which it empties first:
#
#   latch_V_OS_ARCH.tar.gz        (latch_V_windows_amd64.zip) the static
#                                 binary, README.md, the man page
#   latch_V_OS_ARCH.sbom.json     the binary's CycloneDX SBOM
#   latch_PV-1_ARCH.deb           the packages, for each linux platform
#   latch-PV-1.RPMARCH.rpm
#   SHA256SUMS                    the checksums of all of the above
#   SHA256SUMS.minisig            its minisign signature, when
#                                 RELEASE_SIGN_KEY names a secret key
#
# scripts/release.sh image builds the OCI image (docs/install.md,
# "Container image") of IMAGE_PLATFORMS with deploy/cmd/latch-image into
# DIST, without emptying it (so a release and its image can share one
# DIST; a later release empties it again): DIST/latch-image/ (an OCI
# layout) and DIST/latch-image-linux-ARCH.tar (docker-archive), tagged
# latch:VERSION, every time in them the commit's date.
#
# V is VERSION without its "v"; PV is V with "-" made "~" (what deb and
# rpm order before the release). Every byte depends only on the commit
# (and the Go toolchain and tools): the binaries are built with
# -trimpath, no build id and no VCS stamp (which would say whether some
# untracked file was there: the commit is stamped by -ldflags instead,
# "+dirty" when tracked files have changes), the date stamped is the commit's
# (SOURCE_DATE_EPOCH), and archives and packages have fixed mtimes,
# owners and order. Two runs give the same files.
#
# Needs git, GNU tar, gzip, date and touch (Debian's), zip, and minisign
# to sign.
#
# Environment (the Makefile sets GO, DIST and the platforms, tools and
# licenses):
#   GO                     the go command
#   DIST                   the output directory (the release empties it)
#   VERSION                default: the tag v* at HEAD, else a Go
#                          pseudo-version v0.0.0-YYYYMMDDhhmmss-COMMIT12
#   SOURCE_DATE_EPOCH      default: the commit's time
# The release's:
#   CYCLONEDX, NFPM        the pinned tools
#   RELEASE_PLATFORMS      GOOS/GOARCH list
#   RELEASE_SIGN_KEY       a minisign secret key file; unset: not signed
#   RELEASE_SIGN_PASSWORD_FILE  the file holding its password, for a
#                          key made without -W
# The image's:
#   IMAGE_PLATFORMS        linux/ARCH list
#   IMAGE_LICENSES         the SPDX licenses label
set -eu

: "${GO:=go}" "${DIST:=dist}"
mode=${1:-release}
case "$mode" in
release)
	: "${RELEASE_PLATFORMS:=linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64 freebsd/arm64 windows/amd64}"
	: "${CYCLONEDX:?the path of cyclonedx-gomod (make release sets it)}" "${NFPM:?the path of nfpm (make release sets it)}"
	;;
image)
	: "${IMAGE_PLATFORMS:=linux/amd64 linux/arm64}" "${IMAGE_LICENSES:?the image's SPDX licenses label (make image sets it)}"
	;;
*)
	echo "usage: scripts/release.sh [release|image]" >&2
	exit 2
	;;
esac
export LC_ALL=C TZ=UTC
# The packages' maintainer (nfpm.yaml and the changelog).
export LATCH_MAINTAINER="latch developers <latch@latchd.github.io>"

cd "$(dirname "$0")/.."

revision=$(git rev-parse HEAD)
commit=$revision
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	echo "$mode: the work tree has changes that are not committed: the commit is stamped ${commit}+dirty" >&2
	commit="${commit}+dirty"
fi
: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct HEAD)}"
export SOURCE_DATE_EPOCH
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
if [ -z "${VERSION:-}" ]; then
	VERSION=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null) ||
		VERSION=v0.0.0-$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S)-$(git rev-parse --short=12 HEAD)
fi
case "$VERSION" in
v[0-9]*) ;;
*)
	echo "$mode: VERSION $VERSION does not start with v and a digit" >&2
	exit 2
	;;
esac
fv=${VERSION#v}
pv=$(printf '%s' "$fv" | tr -- - '~')
echo "$mode: latch $VERSION, commit $commit of $date, into $DIST"

# The release empties DIST; what the steps make on the way lives in work.
if [ "$mode" = release ]; then
	rm -rf "$DIST"
fi
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# build OS ARCH OUT: latch for OS/ARCH, static, stamped, reproducible,
# into the file OUT. The only go build of a shipped binary.
build() {
	CGO_ENABLED=0 GOOS=$1 GOARCH=$2 "$GO" build -trimpath -buildvcs=false \
		-ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$commit -X main.date=$date" \
		-o "$3" ./cmd/latch
}

if [ "$mode" = image ]; then
	bins=
	for p in $IMAGE_PLATFORMS; do
		echo "image: $p"
		build "${p%/*}" "${p#*/}" "$work/${p%/*}_${p#*/}/latch"
		bins="$bins --binary $p=$work/${p%/*}_${p#*/}/latch"
	done
	# shellcheck disable=SC2086 # bins: the --binary flags, split
	(cd deploy && "$GO" run ./cmd/latch-image build --out "$DIST" \
		--version "$VERSION" --revision "$revision" --created "$SOURCE_DATE_EPOCH" \
		--licenses "$IMAGE_LICENSES" $bins)
	echo "image: done"
	exit 0
fi

# stamp FILE...: the release's mtime on each.
stamp() { touch -h -d "@$SOURCE_DATE_EPOCH" "$@"; }

hostbin=
for p in $RELEASE_PLATFORMS; do
	os=${p%/*} arch=${p#*/}
	name=latch_${fv}_${os}_${arch}
	exe=latch
	[ "$os" = windows ] && exe=latch.exe
	echo "release: $p"
	mkdir -p "$work/$name"
	build "$os" "$arch" "$work/$name/$exe"
	if [ "$p" = "$("$GO" env GOHOSTOS)/$("$GO" env GOHOSTARCH)" ]; then
		hostbin=$work/$name/latch
	fi

	# The SBOM: the modules linked into the binary, at their versions
	# (from the binary's build information), with no serial number or
	# time so that it is reproducible.
	"$CYCLONEDX" bin -json -noserial -notimestamp -version "$VERSION" -output "$DIST/$name.sbom.json" "$work/$name/$exe"

	# The archive: NAME/ holding the binary, README.md, LICENSE when the
	# repository has one, and the man page, in name order, owned by 0:0,
	# with the commit's mtime.
	cp README.md contrib/man/latch.1 "$work/$name/"
	[ -f LICENSE ] && cp LICENSE "$work/$name/"
	chmod 0755 "$work/$name" "$work/$name/$exe"
	find "$work/$name" -type f ! -name "$exe" -exec chmod 0644 {} +
	find "$work/$name" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	if [ "$os" = windows ]; then
		# zip -X: no uid/gid or extra time fields; names sorted; TZ=UTC
		# for its DOS times.
		(cd "$work" && find "$name" -type f | sort | zip -q -X -D -9 -@ "$DIST/$name.zip")
	else
		tar -C "$work" --format=ustar --sort=name --mtime="@$SOURCE_DATE_EPOCH" \
			--owner=0 --group=0 --numeric-owner -cf - "$name" | gzip -n -9 >"$DIST/$name.tar.gz"
	fi
done

# The deb and rpm packages of each linux platform (contrib/packaging/nfpm.yaml).
pkgarches=
for p in $RELEASE_PLATFORMS; do
	case "$p" in linux/*) pkgarches="$pkgarches ${p#linux/}" ;; esac
done
if [ -n "$pkgarches" ]; then
	# The bash completion, from a binary that runs here.
	if [ -n "$hostbin" ]; then
		"$hostbin" completion bash >"$work/latch.bash"
	else
		"$GO" run ./cmd/latch completion bash >"$work/latch.bash"
	fi
	gzip -n -9 -c contrib/man/latch.1 >"$work/latch.1.gz"
	cat >"$work/changelog.yaml" <<-EOF
		- semver: "$pv-1"
		  date: "$date"
		  packager: "$LATCH_MAINTAINER"
		  deb:
		    urgency: medium
		    distributions: [stable]
		  changes:
		    - note: "latch $VERSION, from commit $(printf %.12s "$commit")"
	EOF
	stamp "$work/latch.bash" "$work/latch.1.gz" "$work/changelog.yaml"
	ln -s "$(pwd)/contrib" "$work/"
	cp README.md "$work/"
	stamp "$work/README.md"
	for arch in $pkgarches; do
		for packager in deb rpm; do
			(cd "$work" && LATCH_PKG_VERSION=$pv LATCH_ARCH=$arch LATCH_BIN="$work/latch_${fv}_linux_${arch}/latch" \
				"$NFPM" package --config contrib/packaging/nfpm.yaml --packager $packager --target "$DIST/" >"$work/nfpm.log" 2>&1) ||
				{ cat "$work/nfpm.log" >&2; exit 1; }
		done
	done
fi

# The checksums of every file, and their signature.
(cd "$DIST" && sha256sum -- *.* >SHA256SUMS)
if [ -n "${RELEASE_SIGN_KEY:-}" ]; then
	minisign -S -s "$RELEASE_SIGN_KEY" -m "$DIST/SHA256SUMS" -x "$DIST/SHA256SUMS.minisig" \
		-t "latch $VERSION SHA256SUMS" <"${RELEASE_SIGN_PASSWORD_FILE:-/dev/null}" >/dev/null
	echo "release: signed SHA256SUMS (SHA256SUMS.minisig)"
else
	echo "release: RELEASE_SIGN_KEY is not set: SHA256SUMS is not signed"
fi
echo "release: done:"
(cd "$DIST" && ls -l)
