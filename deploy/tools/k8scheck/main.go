// k8scheck decodes rendered Kubernetes manifests strictly against the API
// types (k8s.io/api: core, apps, policy, autoscaling/v2, networking; and the
// Prometheus operator's monitoring/v1), offline.
//
// `helm lint` only checks that templates render to YAML; a misspelt field
// (`readOnlyRootFileSystem`), a field at the wrong level or a bad quantity
// still renders. The API server would reject or silently drop it; this tool
// fails instead: every document must be a known kind, and strict decoding
// refuses unknown and duplicate fields.
//
// With -hardened, every pod template must also run as non-root with a
// read-only root filesystem, no privilege escalation, all capabilities
// dropped and the RuntimeDefault seccomp profile (what a cluster admin's
// "restricted" Pod Security Standard asks).
//
// Usage: k8scheck [-hardened] FILE... ("-" or no FILE reads standard input).
// Exit 0 when every document passes, 1 otherwise, 2 on usage errors.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func main() {
	hardened := flag.Bool("hardened", false, "also require hardened pod security settings on every pod template")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: k8scheck [-hardened] FILE... (\"-\" or none: standard input)")
		flag.PrintDefaults()
	}
	flag.Parse()

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme, autoscalingv2.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, "k8scheck: building the scheme:", err)
			os.Exit(2)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

	files := flag.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	failures, objects, pods := 0, 0, 0
	for _, name := range files {
		docs, err := readDocuments(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			failures++
			continue
		}
		for i, doc := range docs {
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			where := fmt.Sprintf("%s: document %d", name, i+1)
			if gvk != nil && gvk.Kind != "" {
				where += fmt.Sprintf(" (%s %s)", gvk.GroupVersion().String(), gvk.Kind)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", where, err)
				failures++
				continue
			}
			objects++
			if !*hardened {
				continue
			}
			if spec := podSpecOf(obj); spec != nil {
				pods++
				for _, problem := range hardeningProblems(spec) {
					fmt.Fprintf(os.Stderr, "%s: %s\n", where, problem)
					failures++
				}
			}
		}
	}
	if *hardened && pods == 0 && failures == 0 {
		fmt.Fprintln(os.Stderr, "k8scheck: -hardened given but no pod template was found")
		failures++
	}
	fmt.Printf("k8scheck: %d objects decoded strictly, %d pod templates checked, %d problems\n", objects, pods, failures)
	if failures > 0 {
		os.Exit(1)
	}
}

// readDocuments splits a YAML stream at "---" and drops documents that hold
// only comments or whitespace (helm emits "# Source:" headers for templates
// that render to nothing).
func readDocuments(name string) ([][]byte, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if hasContent(doc) {
			docs = append(docs, doc)
		}
	}
}

func hasContent(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		t := strings.TrimSpace(string(line))
		if t != "" && t != "---" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

func podSpecOf(obj runtime.Object) *corev1.PodSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec
	case *corev1.Pod:
		return &o.Spec
	}
	return nil
}

// hardeningProblems lists what keeps a pod from the restricted profile. A
// setting counts when the container sets it or (where Kubernetes allows it)
// inherits it from the pod's securityContext.
func hardeningProblems(spec *corev1.PodSpec) []string {
	var out []string
	pod := spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range containers {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		name := "container " + c.Name
		if !isTrue(firstBool(sc.RunAsNonRoot, pod.RunAsNonRoot)) {
			out = append(out, name+": runAsNonRoot is not true")
		}
		if uid := firstInt(sc.RunAsUser, pod.RunAsUser); uid == nil || *uid == 0 {
			out = append(out, name+": runAsUser must be a numeric non-zero uid")
		}
		if !isTrue(sc.ReadOnlyRootFilesystem) {
			out = append(out, name+": readOnlyRootFilesystem is not true")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			out = append(out, name+": allowPrivilegeEscalation is not false")
		}
		if sc.Capabilities == nil || !dropsAll(sc.Capabilities.Drop) || len(sc.Capabilities.Add) > 0 {
			out = append(out, name+": capabilities must drop ALL and add none")
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = pod.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			out = append(out, name+": seccompProfile is not RuntimeDefault")
		}
	}
	return out
}

func firstBool(a, b *bool) *bool {
	if a != nil {
		return a
	}
	return b
}

func firstInt(a, b *int64) *int64 {
	if a != nil {
		return a
	}
	return b
}

func isTrue(b *bool) bool { return b != nil && *b }

func dropsAll(caps []corev1.Capability) bool {
	for _, c := range caps {
		if c == "ALL" {
			return true
		}
	}
	return false
}
