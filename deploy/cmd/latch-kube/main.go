// Command latch-kube checks latch's Kubernetes manifests offline (the
// tests and docs/install.md's "Kubernetes" run it).
//
//	latch-kube check DIR...
//	latch-kube pods --namespace NS --ips IP,IP,IP DIR
//
// check builds each kustomization as kubectl apply -k would, decodes
// every object strictly into the Kubernetes API types, checks that they
// fit together and fit latch, and prints "DIR: ok" or every problem.
// pods prints, as JSON, the StatefulSet's pods with their arguments and
// environment expanded as the kubelet would, pod i at the i-th IP.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/latchd/latch/deploy/kube"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: latch-kube check DIR... | pods --namespace NS --ips IP,... DIR")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "check":
		err = check(os.Args[2:])
	case "pods":
		err = pods(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "latch-kube:", err)
		os.Exit(1)
	}
}

func load(dir string) (*kube.Objects, error) {
	y, err := kube.Render(dir)
	if err != nil {
		return nil, err
	}
	return kube.Decode(y)
}

func check(dirs []string) error {
	if len(dirs) == 0 {
		return errors.New("check: no directory")
	}
	failed := false
	for _, dir := range dirs {
		objs, err := load(dir)
		if err != nil {
			return err
		}
		errs := kube.Check(objs)
		for _, e := range errs {
			fmt.Printf("%s: %v\n", dir, e)
		}
		if len(errs) > 0 {
			failed = true
			continue
		}
		fmt.Printf("%s: ok: %d StatefulSet, %d Services, %d PodDisruptionBudget, %d ServiceMonitor\n", dir,
			len(objs.StatefulSets), len(objs.Services), len(objs.PDBs), len(objs.ServiceMonitors))
	}
	if failed {
		return errors.New("check failed")
	}
	return nil
}

func pods(args []string) error {
	fs := flag.NewFlagSet("pods", flag.ContinueOnError)
	ns := fs.String("namespace", "default", "the namespace of the pods")
	ips := fs.String("ips", "", "the pods' IPs, comma-separated, pod 0 first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *ips == "" {
		return errors.New("usage: latch-kube pods --namespace NS --ips IP,... DIR")
	}
	objs, err := load(fs.Arg(0))
	if err != nil {
		return err
	}
	p, err := kube.Pods(objs, *ns, strings.Split(*ips, ","))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}
