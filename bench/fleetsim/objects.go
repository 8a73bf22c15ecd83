package main

import (
	"fmt"
	"math/rand/v2"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// words make the names, labels and values of the members' objects: drawn per
// member and object from a seeded generator, so that members differ from
// one another and a run with the same seed builds the same fleet.
var words = strings.Fields(`alpha amber anchor apex arc argon aspen atlas aurora axis basalt beacon birch
blaze bolt breeze cedar cinder cobalt comet coral crest delta drift ember falcon fern flint forge frost
garnet glacier granite harbor hazel helix heron indigo iris jade juniper kestrel lagoon larch lumen lynx
maple meadow mesa nebula nimbus oak onyx orbit osprey pebble pine prism quartz quill raven reef ridge
sable sage sequoia shale sierra slate sorrel spruce summit talon thistle tide timber topaz tundra umber
vale vapor vertex willow wren yarrow zephyr zinc`)

// gen is the generator of member m's object k: the same (seed, m, k) gives
// the same object, so that an update changes only what it means to change.
func gen(seed uint64, m, k int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(m)<<24|uint64(k)))
}

func word(r *rand.Rand) string { return words[r.IntN(len(words))] }

// text is about n bytes of words.
func text(r *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(word(r))
	}
	return sb.String()
}

// memberLabels are labels as a team's objects carry them: some shared
// across a member's objects (team, environment), some per object.
func memberLabels(r *rand.Rand, m int, app string) map[string]string {
	l := map[string]string{
		"app.kubernetes.io/name":    app,
		"app.kubernetes.io/part-of": fmt.Sprintf("%s-%d", words[m%len(words)], m),
		"team":                      words[(m*7)%len(words)],
		"environment":               []string{"prod", "staging", "dev"}[m%3],
	}
	for range r.IntN(4) {
		l["example.com/"+word(r)] = word(r) + "-" + fmt.Sprint(r.IntN(1000))
	}
	return l
}

// configMap is member m's ConfigMap k at version: 3 to 8 keys of settings
// and one configuration file, 1 to 4 KB of data in all.
func configMap(seed uint64, ns string, m, k int, version string) *corev1ac.ConfigMapApplyConfiguration {
	r := gen(seed, m, k)
	app := word(r) + "-" + word(r)
	name := fmt.Sprintf("%s-config-%d", app, k)
	data := map[string]string{"version": version}
	for range 2 + r.IntN(6) {
		data[word(r)+"."+word(r)] = text(r, 8+r.IntN(120))
	}
	var file strings.Builder
	size := 512 + r.IntN(2560)
	for file.Len() < size {
		fmt.Fprintf(&file, "%s:\n  %s: %q\n  replicas: %d\n", word(r), word(r), text(r, 20+r.IntN(60)), r.IntN(10))
	}
	data["application.yaml"] = file.String()
	return corev1ac.ConfigMap(name, ns).WithLabels(memberLabels(r, m, app)).WithData(data)
}

// deployment is member m's Deployment k: one to three containers with
// environment, ports, resources and probes, and an annotation of
// description, 1.5 to 4 KB in all.
func deployment(seed uint64, ns string, m, k int) *appsv1ac.DeploymentApplyConfiguration {
	r := gen(seed, m, 1<<20|k)
	app := word(r) + "-" + word(r)
	name := fmt.Sprintf("%s-%d", app, k)
	labels := memberLabels(r, m, app)
	selector := map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/instance": name}
	podLabels := map[string]string{}
	for key, v := range labels {
		podLabels[key] = v
	}
	for key, v := range selector {
		podLabels[key] = v
	}
	spec := corev1ac.PodSpec().WithServiceAccountName(app)
	for c := range 1 + r.IntN(2) {
		ctr := corev1ac.Container().
			WithName(fmt.Sprintf("%s-%d", word(r), c)).
			WithImage(fmt.Sprintf("registry.example.com/%s/%s:v%d.%d.%d", words[m%len(words)], word(r), r.IntN(5), r.IntN(30), r.IntN(100))).
			WithArgs("--"+word(r)+"="+word(r), "--log-level=info", fmt.Sprintf("--port=%d", 8000+r.IntN(1000))).
			WithPorts(corev1ac.ContainerPort().WithName(fmt.Sprintf("http-%d", c)).WithContainerPort(int32(8000 + c))).
			WithResources(corev1ac.ResourceRequirements().
				WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 50+r.IntN(500))), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", 64+r.IntN(512)))}).
				WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", 600+r.IntN(1024)))})).
			WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/" + word(r)).WithPort(intstr.FromString(fmt.Sprintf("http-%d", c)))).WithPeriodSeconds(int32(5 + r.IntN(20))))
		for e := range 4 + r.IntN(10) {
			ctr.WithEnv(corev1ac.EnvVar().WithName(fmt.Sprintf("%s_%s_%d", strings.ToUpper(word(r)), strings.ToUpper(word(r)), e)).WithValue(text(r, 4+r.IntN(60))))
		}
		spec.WithContainers(ctr)
	}
	return appsv1ac.Deployment(name, ns).
		WithLabels(labels).
		WithAnnotations(map[string]string{"example.com/description": text(r, 100+r.IntN(600))}).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(int32(1 + r.IntN(5))).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(podLabels).WithSpec(spec)))
}
