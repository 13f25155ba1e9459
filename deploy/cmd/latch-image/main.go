// Command latch-image builds latch's OCI image (make image runs it) and
// reads one back for the tests.
//
//	latch-image build --out DIR --version V --revision R --created RFC3339 \
//	    --binary linux/amd64=FILE --binary linux/arm64=FILE [flags]
//	latch-image inspect TARBALL
//	latch-image unpack LAYOUT_DIR PLATFORM ROOTFS_DIR
//
// build writes DIR/latch-image (an OCI image layout of every platform)
// and DIR/latch-image-linux-ARCH.tar (a docker-archive tarball per
// platform, for docker load and podman load), then prints the index's
// digest. inspect prints a tarball's image as JSON: its digest, manifest
// and config, as go-containerregistry's tarball reader reads them. unpack
// extracts a platform's root file system from a layout.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/latchd/latch/deploy/image"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: latch-image build|inspect|unpack ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "inspect":
		err = inspect(os.Args[2:])
	case "unpack":
		err = unpack(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "latch-image:", err)
		os.Exit(1)
	}
}

type binaries map[string]string

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }
func (b binaries) Set(v string) error {
	p, file, ok := strings.Cut(v, "=")
	if !ok {
		return errors.New("want PLATFORM=FILE")
	}
	b[p] = file
	return nil
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	bins := binaries{}
	fs.Var(bins, "binary", "PLATFORM=FILE: the static latch binary of a platform (repeat)")
	out := fs.String("out", "dist", "the directory to write the layout and tarballs in")
	var s image.Spec
	fs.StringVar(&s.CABundle, "ca", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates (PEM) to install")
	fs.StringVar(&s.Version, "version", "", "the version label and tag")
	fs.StringVar(&s.Revision, "revision", "", "the VCS revision label")
	created := fs.String("created", "", "the creation time: RFC 3339, or seconds since the epoch (the commit's date)")
	fs.StringVar(&s.Source, "source", "https://github.com/latchd/latch", "the source label")
	fs.StringVar(&s.Licenses, "licenses", "", "the licenses label (an SPDX expression)")
	fs.StringVar(&s.Repository, "repository", "latch", "the image's name in the tarballs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.Version == "" || s.Revision == "" || *created == "" {
		return errors.New("build needs --version, --revision and --created")
	}
	t, err := parseTime(*created)
	if err != nil {
		return err
	}
	s.Created, s.Binaries = t, bins
	idx, err := image.Build(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := image.WriteLayout(filepath.Join(*out, "latch-image"), idx, s.Version); err != nil {
		return err
	}
	platforms := make([]string, 0, len(bins))
	for p := range bins {
		platforms = append(platforms, p)
	}
	slices.Sort(platforms)
	for _, p := range platforms {
		file := filepath.Join(*out, "latch-image-"+strings.ReplaceAll(p, "/", "-")+".tar")
		if err := image.WriteTarball(file, idx, p, s.Repository+":"+s.Version); err != nil {
			return err
		}
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}

func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--created %q: %w", s, err)
	}
	return t.UTC(), nil
}

func inspect(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: latch-image inspect TARBALL")
	}
	img, err := tarball.ImageFromPath(args[0], nil)
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Digest   v1.Hash        `json:"digest"`
		Manifest *v1.Manifest   `json:"manifest"`
		Config   *v1.ConfigFile `json:"config"`
	}{d, m, cf})
}

func unpack(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: latch-image unpack LAYOUT_DIR PLATFORM ROOTFS_DIR")
	}
	idx, err := image.ReadLayout(args[0])
	if err != nil {
		return err
	}
	img, err := image.PlatformImage(idx, args[1])
	if err != nil {
		return err
	}
	return image.Unpack(img, args[2])
}
