// Package kube checks latch's Kubernetes manifests (contrib/kubernetes)
// offline: Render builds a kustomization as kubectl apply -k would (with
// kustomize's own library), Decode reads every object it renders into the
// Kubernetes API types, refusing unknown fields, Check tells whether the
// objects fit together and fit latch (ports, probes, the initial cluster,
// selectors, the security context), and Pods expands the StatefulSet's
// pods' arguments and environment as the kubelet would, for a test to run
// latch with them.
package kube

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// Render builds the kustomization in dir and returns its objects as a
// YAML stream, as kubectl kustomize prints them.
func Render(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kube: kustomize build %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kube: kustomize build %s: %w", dir, err)
	}
	return out, nil
}

// ServiceMonitor is the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1), with the fields latch's uses: unknown ones
// are refused, as for the API types.
type ServiceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace,omitempty"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path,omitempty"`
			Interval string `json:"interval,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// Objects are the rendered objects, by kind.
type Objects struct {
	StatefulSets    []*appsv1.StatefulSet
	Services        []*corev1.Service
	PDBs            []*policyv1.PodDisruptionBudget
	ServiceMonitors []*ServiceMonitor
}

// Decode reads a YAML stream of objects strictly: an object of a kind
// not listed in Objects, or with a field its type lacks (a typo), or
// named twice, is an error.
func Decode(stream []byte) (*Objects, error) {
	var objs Objects
	dec := kyaml.NewDecoder(bytes.NewReader(stream))
	seen := map[string]bool{}
	for {
		var doc any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("kube: %w", err)
		}
		if doc == nil {
			continue
		}
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("kube: %w", err)
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("kube: %w", err)
		}
		id := meta.APIVersion + " " + meta.Kind + " " + meta.Metadata.Name
		if seen[id] {
			return nil, fmt.Errorf("kube: %s twice", id)
		}
		seen[id] = true
		var target any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 StatefulSet":
			o := &appsv1.StatefulSet{}
			objs.StatefulSets, target = append(objs.StatefulSets, o), o
		case "v1 Service":
			o := &corev1.Service{}
			objs.Services, target = append(objs.Services, o), o
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			objs.PDBs, target = append(objs.PDBs, o), o
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o := &ServiceMonitor{}
			objs.ServiceMonitors, target = append(objs.ServiceMonitors, o), o
		default:
			return nil, fmt.Errorf("kube: %s: a kind this check does not know", id)
		}
		if err := yaml.UnmarshalStrict(raw, target); err != nil {
			return nil, fmt.Errorf("kube: %s: %w", id, err)
		}
	}
	if len(seen) == 0 {
		return nil, errors.New("kube: no objects")
	}
	return &objs, nil
}
