// Package kubernetes_test checks the manifests in deploy/kubernetes: each document parses,
// strictly, into its k8s.io/api type (a misspelled or misplaced field fails), and the node
// DaemonSet and the training Job have the properties one mount per node depends on.
package kubernetes_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// object is one parsed manifest document, and where it came from.
type object struct {
	where string // file:document
	obj   any    // *appsv1.DaemonSet, *batchv1.Job, ...
}

// newObject is the typed object for a document's apiVersion and kind.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		return &corev1.Namespace{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, nil
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}, nil
	case "batch/v1 Job":
		return &batchv1.Job{}, nil
	}
	return nil, fmt.Errorf("no type known here for apiVersion %q kind %q", apiVersion, kind)
}

// documentSep splits a YAML stream into documents.
var documentSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// parse parses every document of a YAML stream strictly into its type.
func parse(name string, data []byte) ([]object, error) {
	var objs []object
	for i, doc := range documentSep.Split(string(data), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
			continue
		}
		where := fmt.Sprintf("%s: document %d", name, i+1)
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		obj, err := newObject(tm.APIVersion, tm.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		// Unknown and duplicate fields are errors.
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", where, tm.Kind, err)
		}
		objs = append(objs, object{where, obj})
	}
	return objs, nil
}

// stripComments drops YAML comment lines, to tell an empty document.
func stripComments(b []byte) []byte {
	var out [][]byte
	for line := range bytes.Lines(b) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, nil)
}

// manifests parses every manifest of this directory.
func manifests(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	var objs []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := parse(f, b)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	return objs
}

// only returns the one object of type T, failing unless there is exactly one.
func only[T any](t *testing.T, objs []object) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if x, ok := o.obj.(T); ok {
			found = append(found, x)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d manifests of type %T, want 1", len(found), zero)
	}
	return found[0]
}

// TestManifestsStrict: every document parses strictly into its type, and the parse does fail
// on a misspelled field, a field in the wrong place, a value of the wrong type and an unknown kind.
func TestManifestsStrict(t *testing.T) {
	objs := manifests(t)
	t.Logf("%d documents parsed", len(objs))

	b, err := os.ReadFile("vidfs-node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"              mountPropagation: Bidirectional", "              mountPropogation: Bidirectional", `unknown field "mountPropogation"`},
		{"      terminationGracePeriodSeconds: 60", "      terminationGracePeriodSecond: 60", "terminationGracePeriodSecond"},
		{"            privileged: true", "            privileged: true\n            capabilites: {add: [SYS_ADMIN]}", "capabilites"},
		{"              memory: 34Gi\n              cpu: \"8\"", "              memory: 34Gi\n              cpu: [8]", "quantities must match"},
		{"kind: DaemonSet", "kind: DaemonSett", "no type known"},
	} {
		if !bytes.Contains(b, []byte(c.from)) {
			t.Fatalf("vidfs-node.yaml has no %q to change", c.from)
		}
		_, err := parse("changed vidfs-node.yaml", bytes.Replace(b, []byte(c.from), []byte(c.to), 1))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("with %q instead of %q, the parse gave %v, want an error about %s", c.to, c.from, err, c.want)
		}
	}
}

// vidfsBytes parses one of vidfs's sizes (4GiB, 512MiB, 1TB, 100000).
func vidfsBytes(t *testing.T, s string) int64 {
	t.Helper()
	units := []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				t.Fatalf("size %q: %v", s, err)
			}
			return n * u.n
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("size %q: %v", s, err)
	}
	return n
}

// flag is the value of --name=VALUE or --name VALUE in args, or "".
func flag(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// mountOf is the volume mount of container c at path, failing if there is none.
func mountOf(t *testing.T, c corev1.Container, path string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return m
		}
	}
	t.Fatalf("container %s mounts nothing at %s", c.Name, path)
	return corev1.VolumeMount{}
}

// volumeOf is the pod's volume named name, failing if there is none.
func volumeOf(t *testing.T, spec corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("the pod has no volume %s", name)
	return corev1.Volume{}
}

// TestNodeDaemonSet: the node's mount is made under a hostPath shared both ways, with no more
// privilege than the API server demands for that, is probed through the mount, unmounts before
// it stops, asks for the memory its caches take, reads its keys from a Secret and keeps its
// probe tables on a shared claim.
func TestNodeDaemonSet(t *testing.T) {
	objs := manifests(t)
	ds := only[*appsv1.DaemonSet](t, objs)
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1 (vidfs)", len(spec.Containers))
	}
	c := spec.Containers[0]
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the node's pod shares the host's network, PID or IPC namespace: vidfs needs none of them")
	}

	// The mount: SRC MNT, MNT under the node's directory, which is shared both ways.
	if len(c.Args) < 2 || !strings.Contains(strings.Join(c.Command, " "), `exec vidfs mount "$@"`) {
		t.Fatalf("the container does not run vidfs mount with its args: command %q, args %q", c.Command, c.Args)
	}
	mnt := c.Args[1]
	var node corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(mnt, m.MountPath+"/") {
			node = m
		}
	}
	if node.Name == "" {
		t.Fatalf("the mount point %s is under none of the container's volumes: a mount on a volume itself is kept, dead, by every pod that binds it", mnt)
	}
	if node.MountPropagation == nil || *node.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("the node's volume at %s has mountPropagation %v, want Bidirectional", node.MountPath, node.MountPropagation)
	}
	hp := volumeOf(t, spec, node.Name).HostPath
	if hp == nil || hp.Type == nil || *hp.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("the node's volume is %+v, want a hostPath of type DirectoryOrCreate", hp)
	}
	if env := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "MNT" }); env < 0 || c.Env[env].Value != mnt {
		t.Errorf("$MNT (which the command unmounts if a killed container left it, and creates) is not the mount point %s", mnt)
	}

	// Privilege: the API server admits Bidirectional only in a privileged container; nothing
	// else is asked for.
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("mountPropagation: Bidirectional needs privileged: true (the API server refuses it otherwise)")
	}
	if sc != nil && sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %v added to a privileged container: they say nothing", sc.Capabilities.Add)
	}

	// Probes read the stats file through the mount; preStop unmounts it.
	stats := mnt + "/.vidfs/stats"
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.Exec == nil || !slices.Contains(p.Exec.Command, stats) {
			t.Errorf("the %s probe does not read %s: %+v", name, stats, p)
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
		!slices.Equal(c.Lifecycle.PreStop.Exec.Command, []string{"vidfs", "umount", mnt}) {
		t.Errorf("preStop does not run vidfs umount %s: %+v", mnt, c.Lifecycle)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("terminationGracePeriodSeconds %v: give the unmount at least 30 s", g)
	}

	// Memory: the caches and vidfs's own 250 MiB, requested and limited alike.
	want := vidfsBytes(t, flag(c.Args, "cache-mem")) + vidfsBytes(t, flag(c.Args, "s3-cache-mem")) + 250<<20
	if flag(c.Args, "cache-mem") == "" {
		t.Fatal("no --cache-mem in the args: the memory asked for cannot be checked against it")
	}
	req, lim := c.Resources.Requests[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceMemory]
	if req.Value() < want {
		t.Errorf("memory request %s, below --cache-mem + --s3-cache-mem + 250 MiB = %s", req.String(), resource.NewQuantity(want, resource.BinarySI))
	}
	if lim.Cmp(req) != 0 {
		t.Errorf("memory limit %s is not the request %s", lim.String(), req.String())
	}

	// Credentials from the Secret; the probe cache on the shared claim.
	secret := only[*corev1.Secret](t, objs)
	for _, key := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == key })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil ||
			c.Env[i].ValueFrom.SecretKeyRef.Name != secret.Name || c.Env[i].ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("%s does not come from Secret %s", key, secret.Name)
		}
		if _, ok := secret.StringData[key]; !ok {
			t.Errorf("Secret %s has no %s", secret.Name, key)
		}
	}
	pc := mountOf(t, c, flag(c.Args, "probe-cache"))
	pvc := only[*corev1.PersistentVolumeClaim](t, objs)
	if v := volumeOf(t, spec, pc.Name); v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != pvc.Name {
		t.Errorf("--probe-cache is not on the claim %s: %+v", pvc.Name, v)
	}
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("the probe cache's claim is %v, want ReadWriteMany (every node mounts it)", pvc.Spec.AccessModes)
	}
	if flag(c.Args, "allow-other") == "" && !slices.Contains(c.Args, "--allow-other") {
		t.Error("no --allow-other: pods running as other users could not read the mount")
	}
}

// TestTrainingJob: the training pods bind the node's directory (not the mount) with
// HostToContainer propagation, unprivileged, writable (the ranks write their plans there), wait
// for the mount, and use the mount point the DaemonSet mounts on.
func TestTrainingJob(t *testing.T) {
	objs := manifests(t)
	ds := only[*appsv1.DaemonSet](t, objs)
	dc := ds.Spec.Template.Spec.Containers[0]
	mnt := dc.Args[1]
	var nodeDir string
	for _, m := range dc.VolumeMounts {
		if strings.HasPrefix(mnt, m.MountPath+"/") {
			nodeDir = volumeOf(t, ds.Spec.Template.Spec, m.Name).HostPath.Path
			mnt = strings.TrimPrefix(mnt, m.MountPath) // the mount point under the node's directory
		}
	}

	job := only[*batchv1.Job](t, objs)
	spec := job.Spec.Template.Spec
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if sc := c.SecurityContext; sc != nil && (sc.Privileged != nil && *sc.Privileged || sc.Capabilities != nil && len(sc.Capabilities.Add) > 0) {
			t.Errorf("container %s asks for privilege: reading the node's mount needs none", c.Name)
		}
		var found bool
		for _, m := range c.VolumeMounts {
			v := volumeOf(t, spec, m.Name)
			if v.HostPath == nil || v.HostPath.Path != nodeDir {
				continue
			}
			found = true
			if m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
				t.Errorf("container %s binds %s with propagation %v, want HostToContainer (else a mount restarted later is never seen)", c.Name, nodeDir, m.MountPropagation)
			}
			if m.ReadOnly {
				t.Errorf("container %s binds %s read-only: the ranks write their plans there", c.Name, nodeDir)
			}
			where := m.MountPath + mnt
			all := strings.Join(slices.Concat(c.Command, c.Args), "\n")
			if !strings.Contains(all, where) {
				t.Errorf("container %s does not use the mount at %s: %q", c.Name, where, all)
			}
		}
		if !found {
			t.Errorf("container %s does not bind the node's directory %s", c.Name, nodeDir)
		}
	}
	if len(spec.InitContainers) == 0 || !strings.Contains(strings.Join(spec.InitContainers[0].Command, " "), ".vidfs/stats") {
		t.Error("no init container waits for the node's mount to serve (.vidfs/stats)")
	}
}
