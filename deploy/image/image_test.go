package image

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func spec(t *testing.T) Spec {
	t.Helper()
	dir := t.TempDir()
	s := Spec{
		Binaries:   map[string]string{},
		CABundle:   filepath.Join(dir, "ca.pem"),
		Version:    "v1.2.3",
		Revision:   "abc",
		Created:    time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC),
		Source:     "https://example.com/latch",
		Repository: "latch",
	}
	for _, arch := range []string{"amd64", "arm64"} {
		f := filepath.Join(dir, "latch-"+arch)
		if err := os.WriteFile(f, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		s.Binaries["linux/"+arch] = f
	}
	if err := os.WriteFile(s.CABundle, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBuildReproducible: two builds of one spec have one digest; another
// time or binary, another.
func TestBuildReproducible(t *testing.T) {
	s := spec(t)
	digest := func(s Spec) string {
		idx, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	a, b := digest(s), digest(s)
	if a != b {
		t.Errorf("two builds: %s and %s", a, b)
	}
	later := s
	later.Created = s.Created.Add(time.Second)
	if digest(later) == a {
		t.Error("another created time, the same digest")
	}
	if err := os.WriteFile(s.Binaries["linux/arm64"], []byte("another"), 0o755); err != nil {
		t.Fatal(err)
	}
	if digest(s) == a {
		t.Error("another binary, the same digest")
	}
}

// TestLayoutAndTarball writes both forms, reads them back and unpacks
// the image.
func TestLayoutAndTarball(t *testing.T) {
	s := spec(t)
	idx, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteLayout(filepath.Join(dir, "layout"), idx, s.Version); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLayout(filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := back.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var plats []string
	for _, d := range m.Manifests {
		plats = append(plats, d.Platform.OS+"/"+d.Platform.Architecture)
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("manifest %s: %s, want an OCI manifest", d.Digest, d.MediaType)
		}
	}
	if !slices.Equal(plats, []string{"linux/amd64", "linux/arm64"}) || m.MediaType != types.OCIImageIndex {
		t.Errorf("index %s of %q", m.MediaType, plats)
	}

	file := filepath.Join(dir, "amd64.tar")
	if err := WriteTarball(file, idx, "linux/amd64", "latch:v1.2.3"); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/bin/latch", "serve"}) ||
		cf.Architecture != "amd64" || !cf.Created.Equal(s.Created) || c.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("config %+v", cf)
	}
	if _, ok := c.Labels["org.opencontainers.image.licenses"]; ok {
		t.Error("an empty licenses label")
	}

	img, err = PlatformImage(back, "linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "rootfs")
	if err := Unpack(img, root); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(root, "usr/bin/latch"))
	if err != nil || string(bin) != "binary for arm64" {
		t.Errorf("unpacked binary %q, %v", bin, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "data")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("unpacked /data: %v %v", fi, err)
	}
}

func TestBuildRefuses(t *testing.T) {
	s := spec(t)
	s.Binaries["darwin/arm64"] = s.Binaries["linux/arm64"]
	if _, err := Build(s); err == nil {
		t.Error("built an image for darwin")
	}
	s = spec(t)
	if err := os.WriteFile(s.CABundle, []byte("not PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(s); err == nil {
		t.Error("built an image with a CA bundle of no certificate")
	}
}
