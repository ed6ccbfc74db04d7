package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The manifests a suite keeps on disk (CRDs from controller-gen's config/crd/bases, webhook
// configurations from config/webhook), read as envtest reads them.

// readCRDs returns the CRDs of opts: those given, then those read from its paths, in order.
// A CRD named twice is installed once, the last one given winning, as envtest does.
func readCRDs(opts Options) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	missingIsError := opts.ErrorIfCRDPathMissing || opts.CRDInstallOptions.ErrorIfPathMissing
	var all []*apiextensionsv1.CustomResourceDefinition
	for _, c := range slices.Concat(opts.CRDInstallOptions.CRDs, opts.CRDs) {
		c = c.DeepCopy()
		c.APIVersion, c.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
		all = append(all, c)
	}
	for _, path := range slices.Concat(opts.CRDInstallOptions.Paths, opts.CRDDirectoryPaths) {
		docs, err := readManifests(path, missingIsError)
		if err != nil {
			return nil, fmt.Errorf("testenv: reading CRDs: %w", err)
		}
		for _, d := range docs {
			if d.meta.Kind != "CustomResourceDefinition" {
				continue
			}
			c := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(d.raw, c); err != nil {
				return nil, fmt.Errorf("testenv: reading CRDs: %s: %w", d.file, err)
			}
			if c.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
				return nil, fmt.Errorf("testenv: reading CRDs: %s: %s is %s; only apiextensions.k8s.io/v1 is served", d.file, c.Name, c.APIVersion)
			}
			all = append(all, c)
		}
	}
	// The last definition of a name wins; each keeps the place of its first.
	at := map[string]int{}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, c := range all {
		if i, ok := at[c.Name]; ok {
			out[i] = c
			continue
		}
		at[c.Name] = len(out)
		out = append(out, c)
	}
	return out, nil
}

// readWebhooks returns the webhook configurations of the files at paths.
func readWebhooks(paths []string, missingIsError bool) ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	var mutating []*admissionregistrationv1.MutatingWebhookConfiguration
	var validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	for _, path := range paths {
		docs, err := readManifests(path, missingIsError)
		if err != nil {
			return nil, nil, fmt.Errorf("testenv: reading webhooks: %w", err)
		}
		for _, d := range docs {
			var obj any
			switch d.meta.Kind {
			case "MutatingWebhookConfiguration":
				m := &admissionregistrationv1.MutatingWebhookConfiguration{}
				mutating, obj = append(mutating, m), m
			case "ValidatingWebhookConfiguration":
				v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
				validating, obj = append(validating, v), v
			default:
				continue
			}
			if d.meta.APIVersion != admissionregistrationv1.SchemeGroupVersion.String() {
				return nil, nil, fmt.Errorf("testenv: reading webhooks: %s: %s %s is %s; only admissionregistration.k8s.io/v1 is served", d.file, d.meta.Kind, d.meta.Name, d.meta.APIVersion)
			}
			if err := yaml.Unmarshal(d.raw, obj); err != nil {
				return nil, nil, fmt.Errorf("testenv: reading webhooks: %s: %w", d.file, err)
			}
		}
	}
	return mutating, validating, nil
}

// document is one YAML or JSON document of a manifest file.
type document struct {
	file string
	raw  []byte
	meta metav1.PartialObjectMetadata
}

// readManifests reads the documents of path: a file, or every .yaml, .yml and .json file of a
// directory (not recursively). A path that does not exist is an error only if missingIsError.
func readManifests(path string, missingIsError bool) ([]document, error) {
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) && !missingIsError {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = files[:0]
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
	}
	var out []document
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(bytes.TrimSpace(raw)) == 0 {
				continue
			}
			d := document{file: f, raw: raw}
			if err := yaml.Unmarshal(raw, &d.meta); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, d)
		}
	}
	return out, nil
}
