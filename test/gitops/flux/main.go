// Command gitops-flux applies a manifest the way Flux's kustomize-controller does on every sync: server-side apply
// through github.com/fluxcd/pkg/ssa's ResourceManager, as field manager kustomize-controller with conflicts forced,
// after the controller's own field-manager clean-up. The options below repeat kustomize-controller v1.7.2's
// (internal/controller/kustomization_controller.go, the release built on ssa v0.60.0) so that what the tests see
// is what a Flux user's cluster sees; flags a Kustomization would set (force, common metadata) stay at their
// defaults.
//
//	gitops-flux -kubeconfig FILE -manifest FILE -mode flux-apply
//
// Prints one JSON object: the tool, the mode and the change set (subject and action of each object).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The controller's name is its field manager (main.go's controllerName), and the API group its labels and
// selectors are named after.
const (
	controllerName = "kustomize-controller"
	kustomizeGroup = "kustomize.toolkit.fluxcd.io"
)

type change struct {
	Subject string `json:"subject"`
	Action  string `json:"action"`
}

type result struct {
	Tool    string   `json:"tool"`
	Mode    string   `json:"mode"`
	Changes []change `json:"changes"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	manifest := flag.String("manifest", "", "YAML manifest (one or more documents)")
	mode := flag.String("mode", "", "flux-apply")
	kustomization := flag.String("kustomization", "apps", "name of the Kustomization the objects belong to (owner labels)")
	kustomizationNS := flag.String("kustomization-namespace", "flux-system", "namespace of that Kustomization")
	flag.Parse()
	if *kubeconfig == "" || *manifest == "" || *mode != "flux-apply" {
		fmt.Fprintln(os.Stderr, "usage: gitops-flux -kubeconfig FILE -manifest FILE -mode flux-apply")
		os.Exit(2)
	}
	out, err := fluxApply(*kubeconfig, *manifest, *kustomization, *kustomizationNS)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gitops-flux: %v\n", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

func fluxApply(kubeconfig, manifest, kustomization, kustomizationNS string) (*result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// An uncached client, as the controller's is for unstructured objects: every Get reads the API server.
	kubeClient, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	file, err := os.Open(manifest)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	objects, err := ssautil.ReadObjects(file)
	if err != nil {
		return nil, err
	}

	// As the controller's reconcile does: the manager with its owner, the owner labels on every object, then
	// apply() normalises the objects before building the options.
	manager := ssa.NewResourceManager(kubeClient, nil, ssa.Owner{Field: controllerName, Group: kustomizeGroup})
	manager.SetOwnerLabels(objects, kustomization, kustomizationNS)
	if err := normalize.UnstructuredList(objects); err != nil {
		return nil, err
	}

	applyOpts := ssa.DefaultApplyOptions()
	applyOpts.Force = false // spec.force's default
	applyOpts.ExclusionSelector = map[string]string{
		kustomizeGroup + "/reconcile": "disabled",
		kustomizeGroup + "/ssa":       "Ignore",
	}
	applyOpts.IfNotPresentSelector = map[string]string{kustomizeGroup + "/ssa": "IfNotPresent"}
	applyOpts.ForceSelector = map[string]string{kustomizeGroup + "/force": "enabled"}
	// The clean-up that takes back fields from the named managers before each apply. Matching is by name prefix
	// (ExactMatch unset), so "kubectl" also names kubectl-rollout, kubectl-edit, kubectl-client-side-apply...
	applyOpts.Cleanup = ssa.ApplyCleanupOptions{
		Annotations: []string{
			corev1.LastAppliedConfigAnnotation,
			"kustomize.toolkit.fluxcd.io/checksum",
			"fluxcd.io/sync-checksum",
		},
		Labels: []string{"fluxcd.io/sync-gc-mark"},
		FieldManagers: []ssa.FieldManager{
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: controllerName, OperationType: metav1.ManagedFieldsOperationUpdate},
		},
		Exclusions: map[string]string{kustomizeGroup + "/ssa": "Merge"},
	}

	changeSet, err := manager.ApplyAllStaged(ctx, objects, applyOpts)
	if err != nil {
		return nil, err
	}
	out := &result{Tool: "flux", Mode: "flux-apply", Changes: []change{}}
	for _, entry := range changeSet.Entries {
		out.Changes = append(out.Changes, change{Subject: entry.Subject, Action: string(entry.Action)})
	}
	return out, nil
}
