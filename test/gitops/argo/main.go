// Command gitops-argo applies and diffs a manifest the way Argo CD does, with the code Argo CD runs for it,
// github.com/argoproj/gitops-engine:
//
//   - argo-apply: a sync's client-side apply of each object, pkg/sync's path when neither Replace nor
//     ServerSideApply is asked for: kube.ResourceOperations.ApplyResource (kubectl's apply in process, which writes
//     the kubectl.kubernetes.io/last-applied-configuration annotation), first as the client dry run a sync starts
//     with, then for real, validated and not forced (a sync's defaults);
//   - argo-diff: the comparison that decides OutOfSync and that self-heal acts on, pkg/diff's Diff of the desired
//     object against the live one, three-way through the last-applied annotation, with no ignoreDifferences
//     (an Application's default).
//
// kubectl's client-side apply sends no field manager, so the API server names the Update after the program: here
// gitops-argo, in Argo CD argocd-application-controller. Nothing in the apply or the diff reads that name.
//
// Both put Argo CD's default tracking label (app.kubernetes.io/instance=<app>) on the desired objects first, as the
// application controller does before it diffs or syncs.
//
//	gitops-argo -kubeconfig FILE -manifest FILE -mode argo-apply|argo-diff [-app NAME]
//
// Prints one JSON object: for argo-apply what kubectl's apply said for each object; for argo-diff whether each object
// is modified (OutOfSync) and the normalised live and predicted live objects the decision was made on.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"os"

	"github.com/argoproj/gitops-engine/pkg/diff"
	"github.com/argoproj/gitops-engine/pkg/utils/kube"
	"github.com/argoproj/gitops-engine/pkg/utils/tracing"
	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// Argo CD's default resource tracking: the label key common.LabelKeyAppInstance.
const appInstanceLabel = "app.kubernetes.io/instance"

type applied struct {
	Subject string `json:"subject"`
	Output  string `json:"output"`
}

type diffed struct {
	Subject        string          `json:"subject"`
	Modified       bool            `json:"modified"`
	NormalizedLive json.RawMessage `json:"normalizedLive"`
	PredictedLive  json.RawMessage `json:"predictedLive"`
}

type result struct {
	Tool    string    `json:"tool"`
	Mode    string    `json:"mode"`
	Applied []applied `json:"applied,omitempty"`
	Diffs   []diffed  `json:"diffs,omitempty"`
	// Synced: no object differs, what the Application would report as its sync status.
	Synced *bool `json:"synced,omitempty"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	manifest := flag.String("manifest", "", "YAML manifest (one or more documents)")
	mode := flag.String("mode", "", "argo-apply or argo-diff")
	app := flag.String("app", "gitops-safe", "the Application's name, put in the tracking label")
	flag.Parse()
	if *kubeconfig == "" || *manifest == "" || (*mode != "argo-apply" && *mode != "argo-diff") {
		fmt.Fprintln(os.Stderr, "usage: gitops-argo -kubeconfig FILE -manifest FILE -mode argo-apply|argo-diff [-app NAME]")
		os.Exit(2)
	}
	out, err := run(*kubeconfig, *manifest, *mode, *app)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gitops-argo: %v\n", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

func run(kubeconfig, manifest, mode, app string) (*result, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	data, err := ioutil.ReadFile(manifest)
	if err != nil {
		return nil, err
	}
	objects, err := kube.SplitYAML(data)
	if err != nil {
		return nil, err
	}
	for _, obj := range objects {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[appInstanceLabel] = app
		obj.SetLabels(labels)
	}
	if mode == "argo-apply" {
		return apply(config, objects)
	}
	return compare(config, objects)
}

func subject(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
}

func apply(config *rest.Config, objects []*unstructured.Unstructured) (*result, error) {
	kubectl := &kube.KubectlCmd{Log: logr.Discard(), Tracer: tracing.NopTracer{}}
	// The schema kubectl's apply builds its strategic merge patch from. The GVK parser it also returns is for
	// server-side diffs only; its error (a known upstream bug for some schemas) does not stop a client-side apply.
	openAPISchema, _, err := kubectl.LoadOpenAPISchema(config)
	if err != nil {
		if _, gvkOnly := err.(*kube.CreateGVKParserError); !gvkOnly {
			return nil, err
		}
	}
	ops, cleanup, err := kubectl.ManageResources(config, openAPISchema)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	out := &result{Tool: "argo", Mode: "argo-apply", Applied: []applied{}}
	for _, obj := range objects {
		// A sync applies every task as a client dry run first, then for real.
		for _, dryRun := range []cmdutil.DryRunStrategy{cmdutil.DryRunClient, cmdutil.DryRunNone} {
			message, err := ops.ApplyResource(context.Background(), obj.DeepCopy(), dryRun, false, true, false)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", subject(obj), err)
			}
			if dryRun == cmdutil.DryRunNone {
				out.Applied = append(out.Applied, applied{Subject: subject(obj), Output: message})
			}
		}
	}
	return out, nil
}

func compare(config *rest.Config, objects []*unstructured.Unstructured) (*result, error) {
	dynamicClient, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	out := &result{Tool: "argo", Mode: "argo-diff", Diffs: []diffed{}}
	synced := true
	for _, obj := range objects {
		apiResource, err := kube.ServerResourceForGroupVersionKind(disco, obj.GroupVersionKind(), "get")
		if err != nil {
			return nil, err
		}
		resource := kube.ToGroupVersionResource(obj.GroupVersionKind().GroupVersion().String(), apiResource)
		live, err := kube.ToResourceInterface(dynamicClient, apiResource, resource, obj.GetNamespace()).
			Get(context.Background(), obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			live = nil
		} else if err != nil {
			return nil, err
		}
		res, err := diff.Diff(obj, live, diff.WithNormalizer(diff.GetNoopNormalizer()), diff.WithLogr(logr.Discard()))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", subject(obj), err)
		}
		if res.Modified {
			synced = false
		}
		out.Diffs = append(out.Diffs, diffed{
			Subject:        subject(obj),
			Modified:       res.Modified,
			NormalizedLive: json.RawMessage(res.NormalizedLive),
			PredictedLive:  json.RawMessage(res.PredictedLive),
		})
	}
	out.Synced = &synced
	return out, nil
}
