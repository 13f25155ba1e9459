// Package image builds latch's OCI image without a container daemon: an
// image FROM scratch holding the static latch binary and a CA bundle,
// for each platform, gathered in a multi-platform index, written as an
// OCI image layout and as docker-archive tarballs (what docker load and
// podman load take). It also reads an image back: Unpack extracts a
// platform's root file system for a runtime such as runc.
//
// The build is reproducible: every time in it (file times in the layers,
// the config's created, the history) is the one given (the commit's
// date), files are sorted and owned by fixed ids, so the same inputs give
// the same digests.
package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed shape. The ports are latch's defaults; the
// environment makes every listener take all of the container's
// interfaces (latch's defaults are 127.0.0.1) and keeps the node's data in
// the /data volume.
const (
	// UID and GID run latch: no name, no home, not root (the id the
	// distroless images call nonroot).
	UID = 65532
	GID = 65532
	// Binary is where the latch binary is.
	Binary = "/usr/bin/latch"
	// CABundle is where the CA certificates are, where Go's crypto/x509
	// looks first on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// DataDir is the volume that holds the node's data dir.
	DataDir = "/data"
)

// Ports are the ports the image exposes, each with the variable that
// sets its listener: memcached, dlock, Redis, ZooKeeper, admin, and Raft
// (which a cluster's node sets with --raft-addr).
var Ports = []struct {
	Port int
	Env  string // "" for Raft: off unless a cluster node sets it
}{
	{11211, "LATCH_MEMCACHE_ADDR"},
	{11212, "LATCH_DLOCK_ADDR"},
	{6379, "LATCH_REDIS_ADDR"},
	{2181, "LATCH_ZOOKEEPER_ADDR"},
	{11280, "LATCH_ADMIN_ADDR"},
	{11290, ""},
}

// Env is the image's environment.
func Env() []string {
	env := []string{"LATCH_DATA_DIR=" + DataDir}
	for _, p := range Ports {
		if p.Env != "" {
			env = append(env, fmt.Sprintf("%s=0.0.0.0:%d", p.Env, p.Port))
		}
	}
	return env
}

// Spec says what to build.
type Spec struct {
	// Binaries maps a platform ("linux/amd64") to its static latch binary.
	Binaries map[string]string
	// CABundle is the PEM file of CA certificates to install.
	CABundle string
	// Version, Revision and Created are the labels' version, VCS revision
	// and time (the commit's date); Created is every time in the image.
	Version, Revision string
	Created           time.Time
	// Source and Licenses are the labels' source repository URL and SPDX
	// license expression.
	Source, Licenses string
	// Repository is the name of the image in the tarballs ("latch"): each
	// is tagged Repository:Version.
	Repository string
}

// Build returns the image index of s's platforms, sorted by platform.
func Build(s Spec) (v1.ImageIndex, error) {
	if len(s.Binaries) == 0 {
		return nil, errors.New("image: no binaries")
	}
	ca, err := caLayer(s)
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	platforms := make([]string, 0, len(s.Binaries))
	for p := range s.Binaries {
		platforms = append(platforms, p)
	}
	slices.Sort(platforms)
	for _, p := range platforms {
		plat, err := parsePlatform(p)
		if err != nil {
			return nil, err
		}
		img, err := platformImage(s, plat, s.Binaries[p], ca)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: plat},
		})
	}
	return idx, nil
}

func parsePlatform(p string) (*v1.Platform, error) {
	os, arch, ok := strings.Cut(p, "/")
	if !ok || os != "linux" || arch == "" || strings.Contains(arch, "/") {
		return nil, fmt.Errorf("image: platform %q: want linux/ARCH", p)
	}
	return &v1.Platform{OS: os, Architecture: arch}, nil
}

// Labels returns the image's labels (org.opencontainers.image.*), less
// those whose value is empty.
func Labels(s Spec) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "latch",
		"org.opencontainers.image.description": "latch, a lock server: memcached (yrmcds locks), dlock, Redis and ZooKeeper protocols over one lock table",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.revision":    s.Revision,
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      s.Source,
		"org.opencontainers.image.licenses":    s.Licenses,
	}
	for k, v := range l {
		if v == "" {
			delete(l, k) // a label not known (no license named yet)
		}
	}
	return l
}

func platformImage(s Spec, plat *v1.Platform, binary string, ca v1.Layer) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	binLayer, err := newLayer(s.Created, []entry{
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/bin/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(Binary, "/"), mode: 0o755, data: bin},
	})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: s.Created.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: ca, History: v1.History{Created: created, CreatedBy: "latch image: CA certificates and the /data volume"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: created, CreatedBy: "latch image: " + Binary}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = created
	cf.Author = ""
	exposed := map[string]struct{}{}
	for _, p := range Ports {
		exposed[fmt.Sprintf("%d/tcp", p.Port)] = struct{}{}
	}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint:   []string{Binary, "serve"},
		Env:          Env(),
		ExposedPorts: exposed,
		Volumes:      map[string]struct{}{DataDir: {}},
		WorkingDir:   DataDir,
		Labels:       Labels(s),
		StopSignal:   "SIGTERM",
	}
	return mutate.ConfigFile(img, cf)
}

// caLayer holds the CA bundle and the /data directory, owned by UID so
// that a volume a runtime creates from it (docker, podman) is writable by
// latch. It is the same for every platform.
func caLayer(s Spec) (v1.Layer, error) {
	pem, err := os.ReadFile(s.CABundle)
	if err != nil {
		return nil, fmt.Errorf("image: reading the CA bundle: %w", err)
	}
	if !bytes.Contains(pem, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("image: %s holds no PEM certificate", s.CABundle)
	}
	return newLayer(s.Created, []entry{
		{name: "data/", mode: 0o700, dir: true, uid: UID, gid: GID},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(CABundle, "/"), mode: 0o644, data: pem},
	})
}

type entry struct {
	name     string
	mode     int64
	dir      bool
	uid, gid int
	data     []byte
}

// newLayer returns a gzipped tar layer of entries, in the order given,
// every file dated mod.
func newLayer(mod time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mod.UTC().Truncate(time.Second),
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// WriteLayout writes idx as an OCI image layout in dir (replacing what is
// there), its index.json naming it by ref (org.opencontainers.image.ref.name).
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	return nil
}

// WriteTarball writes the image of platform p in idx as a docker-archive
// tarball tagged tag.
func WriteTarball(file string, idx v1.ImageIndex, p, tag string) error {
	img, err := PlatformImage(idx, p)
	if err != nil {
		return err
	}
	t, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image: tag: %w", err)
	}
	if err := tarball.WriteToFile(file, t, img); err != nil {
		return fmt.Errorf("image: tarball: %w", err)
	}
	return nil
}

// PlatformImage returns the image of platform p ("linux/amd64") in idx.
func PlatformImage(idx v1.ImageIndex, p string) (v1.Image, error) {
	want, err := parsePlatform(p)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("image: no image for %s", p)
}

// ReadLayout returns the image index that dir's OCI layout names first.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: layout: %w", err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("image: layout: %w", err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: layout: %w", err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("image: layout %s: want one image index in index.json, have %d entries", dir, len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

// Unpack extracts img's file system into dir, which must not exist:
// directories, regular files and symbolic links with their modes and
// owners (the caller must be root to keep the owners).
func Unpack(img v1.Image, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("image: unpack: %w", err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	root := os.Geteuid() == 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("image: unpack: %w", err)
		}
		rel := path.Clean("/" + h.Name)
		if rel == "/" {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(rel))
		mode := os.FileMode(h.Mode) & os.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("image: unpack: %w", err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return fmt.Errorf("image: unpack: %w", err)
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err != nil {
				return fmt.Errorf("image: unpack: %w", err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("image: unpack %s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, target); err != nil {
				return fmt.Errorf("image: unpack: %w", err)
			}
			continue
		default:
			return fmt.Errorf("image: unpack %s: unsupported entry type %q", h.Name, h.Typeflag)
		}
		if err := os.Chmod(target, mode); err != nil {
			return fmt.Errorf("image: unpack: %w", err)
		}
		if root {
			if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
				return fmt.Errorf("image: unpack: %w", err)
			}
		}
	}
}
