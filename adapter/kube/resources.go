package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// object is what the driver reads of any object it makes.
type object struct {
	uid        string
	rv         string
	labels     map[string]string
	finalizers []string
	deleting   bool
}

func objectOf(m metav1.ObjectMeta) object {
	return object{uid: string(m.UID), rv: m.ResourceVersion, labels: m.Labels, finalizers: m.Finalizers, deleting: m.DeletionTimestamp != nil}
}

// splitName is a journal name's namespace and name ("" namespace for a
// namespace).
func splitName(kind campaign.Kind, name string) (ns, n string) {
	if kind == campaign.KindNamespace {
		return "", name
	}
	ns, n, _ = strings.Cut(name, "/")
	return ns, n
}

// kindAPI is what the driver does with each kind of object, by name.
type kindAPI struct {
	get    func(ctx context.Context, ns, name string) (object, error)
	del    func(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error
	patch  func(ctx context.Context, ns, name string, data []byte) error
	list   func(ctx context.Context, selector string) ([]listed, error)
	create func(ctx context.Context, spec any, labels map[string]string) (string, error)
}

type listed struct {
	ns, name string
	object
}

func (d *Driver) api(kind campaign.Kind) (kindAPI, error) {
	core, nw := d.cs.CoreV1(), d.cs.NetworkingV1()
	lo := func(sel string) metav1.ListOptions { return metav1.ListOptions{LabelSelector: sel} }
	mp := types.MergePatchType
	po := metav1.PatchOptions{}
	meta := func(labels map[string]string, m *metav1.ObjectMeta) {
		m.Labels = maps.Clone(m.Labels)
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		maps.Copy(m.Labels, labels)
		m.Finalizers = []string{Finalizer}
	}
	switch kind {
	case campaign.KindNamespace:
		return kindAPI{
			get: func(ctx context.Context, _, n string) (object, error) {
				o, err := core.Namespaces().Get(ctx, n, metav1.GetOptions{})
				return objectOf(o.ObjectMeta), err
			},
			del: func(ctx context.Context, _, n string, opts metav1.DeleteOptions) error {
				return core.Namespaces().Delete(ctx, n, opts)
			},
			patch: func(ctx context.Context, _, n string, data []byte) error {
				_, err := core.Namespaces().Patch(ctx, n, mp, data, po)
				return err
			},
			list: func(ctx context.Context, sel string) ([]listed, error) {
				l, err := core.Namespaces().List(ctx, lo(sel))
				var out []listed
				for _, o := range l.Items {
					out = append(out, listed{"", o.Name, objectOf(o.ObjectMeta)})
				}
				return out, err
			},
			create: func(ctx context.Context, spec any, labels map[string]string) (string, error) {
				o := spec.(*namespacePlan).ns.DeepCopy()
				meta(labels, &o.ObjectMeta)
				o, err := core.Namespaces().Create(ctx, o, metav1.CreateOptions{})
				return string(o.UID), err
			},
		}, nil
	case campaign.KindServiceAccount:
		return kindAPI{
			get: func(ctx context.Context, ns, n string) (object, error) {
				o, err := core.ServiceAccounts(ns).Get(ctx, n, metav1.GetOptions{})
				return objectOf(o.ObjectMeta), err
			},
			del: func(ctx context.Context, ns, n string, opts metav1.DeleteOptions) error {
				return core.ServiceAccounts(ns).Delete(ctx, n, opts)
			},
			patch: func(ctx context.Context, ns, n string, data []byte) error {
				_, err := core.ServiceAccounts(ns).Patch(ctx, n, mp, data, po)
				return err
			},
			list: func(ctx context.Context, sel string) ([]listed, error) {
				l, err := core.ServiceAccounts("").List(ctx, lo(sel))
				var out []listed
				for _, o := range l.Items {
					out = append(out, listed{o.Namespace, o.Name, objectOf(o.ObjectMeta)})
				}
				return out, err
			},
			create: func(ctx context.Context, spec any, labels map[string]string) (string, error) {
				o := spec.(*saPlan).sa.DeepCopy()
				meta(labels, &o.ObjectMeta)
				o, err := core.ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return string(o.UID), err
			},
		}, nil
	case campaign.KindSecret:
		return kindAPI{
			get: func(ctx context.Context, ns, n string) (object, error) {
				o, err := core.Secrets(ns).Get(ctx, n, metav1.GetOptions{})
				return objectOf(o.ObjectMeta), err
			},
			del: func(ctx context.Context, ns, n string, opts metav1.DeleteOptions) error {
				return core.Secrets(ns).Delete(ctx, n, opts)
			},
			patch: func(ctx context.Context, ns, n string, data []byte) error {
				_, err := core.Secrets(ns).Patch(ctx, n, mp, data, po)
				return err
			},
			list: func(ctx context.Context, sel string) ([]listed, error) {
				l, err := core.Secrets("").List(ctx, lo(sel))
				var out []listed
				for _, o := range l.Items {
					out = append(out, listed{o.Namespace, o.Name, objectOf(o.ObjectMeta)})
				}
				return out, err
			},
			create: func(ctx context.Context, spec any, labels map[string]string) (string, error) {
				o := spec.(*secretPlan).secret.DeepCopy()
				meta(labels, &o.ObjectMeta)
				o, err := core.Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return string(o.UID), err
			},
		}, nil
	case campaign.KindNetworkPolicy:
		return kindAPI{
			get: func(ctx context.Context, ns, n string) (object, error) {
				o, err := nw.NetworkPolicies(ns).Get(ctx, n, metav1.GetOptions{})
				return objectOf(o.ObjectMeta), err
			},
			del: func(ctx context.Context, ns, n string, opts metav1.DeleteOptions) error {
				return nw.NetworkPolicies(ns).Delete(ctx, n, opts)
			},
			patch: func(ctx context.Context, ns, n string, data []byte) error {
				_, err := nw.NetworkPolicies(ns).Patch(ctx, n, mp, data, po)
				return err
			},
			list: func(ctx context.Context, sel string) ([]listed, error) {
				l, err := nw.NetworkPolicies("").List(ctx, lo(sel))
				var out []listed
				for _, o := range l.Items {
					out = append(out, listed{o.Namespace, o.Name, objectOf(o.ObjectMeta)})
				}
				return out, err
			},
			create: func(ctx context.Context, spec any, labels map[string]string) (string, error) {
				o := spec.(*policyPlan).np.DeepCopy()
				meta(labels, &o.ObjectMeta)
				o, err := nw.NetworkPolicies(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return string(o.UID), err
			},
		}, nil
	case campaign.KindContainer:
		return kindAPI{
			get: func(ctx context.Context, ns, n string) (object, error) {
				o, err := core.Pods(ns).Get(ctx, n, metav1.GetOptions{})
				return objectOf(o.ObjectMeta), err
			},
			del: func(ctx context.Context, ns, n string, opts metav1.DeleteOptions) error {
				return core.Pods(ns).Delete(ctx, n, opts)
			},
			patch: func(ctx context.Context, ns, n string, data []byte) error {
				_, err := core.Pods(ns).Patch(ctx, n, mp, data, po)
				return err
			},
			list: func(ctx context.Context, sel string) ([]listed, error) {
				l, err := core.Pods("").List(ctx, lo(sel))
				var out []listed
				for _, o := range l.Items {
					out = append(out, listed{o.Namespace, o.Name, objectOf(o.ObjectMeta)})
				}
				return out, err
			},
			create: func(ctx context.Context, spec any, labels map[string]string) (string, error) {
				pp := spec.(*podPlan)
				o := pp.pod.DeepCopy()
				meta(labels, &o.ObjectMeta)
				if err := d.graderAddress(ctx, pp, o); err != nil {
					return "", err
				}
				o, err := core.Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				if pp.graderPort == 0 && pp.grader != nil {
					pp.grader.set(string(o.UID), err)
				}
				return string(o.UID), err
			},
		}, nil
	}
	return kindAPI{}, fmt.Errorf("no kind %q on a cluster", kind)
}

// graderAddress names the grader by its pod's IP in a workspace's
// command and environment (the cluster has no DNS the workspaces could
// use): it waits for this bring-up's grader's create, then for that pod
// (by its UID) to have an address.
func (d *Driver) graderAddress(ctx context.Context, pp *podPlan, pod *corev1.Pod) error {
	if pp.graderPort == 0 {
		return nil // the grader itself
	}
	var uid string
	if g := pp.grader; g != nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the grader's pod was not made: %w", ctx.Err())
		case <-g.made:
		}
		if g.err != nil {
			return fmt.Errorf("the grader's pod was not made: %w", driver.ErrNotReady)
		}
		uid = g.uid
	}
	// Learned once for the bring-up's workspaces: the pod keeps its IP.
	ip := pp.grader.address()
	for delay := 20 * time.Millisecond; ip == ""; delay = min(2*delay, time.Second) {
		g, err := d.cs.CoreV1().Pods(pod.Namespace).Get(ctx, serverPodName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && uid != "" && string(g.UID) != uid:
			return fmt.Errorf("no grader's pod %s/%s of this bring-up to name in the workspace: %w", pod.Namespace, serverPodName, driver.ErrNotReady)
		case err == nil && g.Status.PodIP != "":
			ip = g.Status.PodIP
		case err == nil && (g.Status.Phase == corev1.PodFailed || g.Status.Phase == corev1.PodSucceeded):
			return fmt.Errorf("the grader's pod ended (%s) before it had an address", g.Status.Phase)
		}
		if ip != "" {
			pp.grader.learn(ip)
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the grader's pod has no address yet: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(pp.graderPort))
	c := &pod.Spec.Containers[0]
	for i, a := range c.Args {
		if a == graderURLFlag && i+1 < len(c.Args) {
			c.Args[i+1] = url
		}
	}
	for i, e := range c.Env {
		if e.Name == "AGENTPEN_GRADER_URL" || e.Name == "AGENTPEN_SERVER_URL" {
			c.Env[i].Value = url
		}
	}
	return nil
}

// Create makes one object of a layout with o's labels and the custody
// finalizer, and returns its UID.
func (d *Driver) Create(ctx context.Context, o *driver.Object) (string, error) {
	k, err := d.api(o.Kind)
	if err != nil {
		return "", err
	}
	var uid string
	err = d.call(ctx, func() (err error) {
		uid, err = k.create(ctx, o.Spec, o.Labels)
		return err
	})
	if err != nil {
		return "", classify(fmt.Errorf("create %s %s: %w", o.Kind, o.Name, err))
	}
	return uid, nil
}

// Start does nothing: a pod starts once it is made.
func (d *Driver) Start(context.Context, *driver.Object) error { return nil }

// Ready waits until the pod is Ready (its readiness probe passed), or a
// pod without a probe is Running; it fails at once when the pod ended or
// one of its containers cannot start (an image the node lacks).
func (d *Driver) Ready(ctx context.Context, o *driver.Object) error {
	ns, name := splitName(o.Kind, o.Name)
	var last string
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		pod, err := d.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		case string(pod.UID) != o.ID:
			return fmt.Errorf("%w: pod %s is not the one created (%s)", driver.ErrNotReady, o.Name, o.ID)
		case ended(pod) != "":
			return fmt.Errorf("%w: pod %s: %s", driver.ErrNotReady, o.Name, ended(pod))
		default:
			if podReady(pod) {
				return nil
			}
			last = string(pod.Status.Phase)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w: pod %s (last: %s)", driver.ErrNotReady, o.Name, last)
			}
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// ended says why the pod will never run (it ended, or a container of
// it cannot start by itself), or "".
func ended(pod *corev1.Pod) string {
	if p := pod.Status.Phase; p == corev1.PodFailed || p == corev1.PodSucceeded {
		return fmt.Sprintf("ended (%s): %s", p, pod.Status.Message)
	}
	return waiting(pod)
}

// waiting says why a container of the pod cannot start, when it never
// will by itself (its image missing, refused, its config invalid).
func waiting(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return w.Reason + ": " + w.Message
			}
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("container %s ended (%s, exit %d)", cs.Name, t.Reason, t.ExitCode)
		}
	}
	return ""
}

func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Observe gets the journalled object by its name and holds it to its UID:
// another object under the name (a twin) is not the journalled one, which
// is then absent.
func (d *Driver) Observe(ctx context.Context, r campaign.Resource) cleanup.Observation {
	k, err := d.api(r.Kind)
	if err != nil {
		return cleanup.Observation{State: cleanup.Unknown, Err: err.Error()}
	}
	ns, name := splitName(r.Kind, r.Name)
	var o object
	err = d.call(ctx, func() (err error) { o, err = k.get(ctx, ns, name); return err })
	switch err := classify(err); {
	case errors.Is(err, driver.ErrNotFound):
		return cleanup.Observation{State: cleanup.Absent}
	case err != nil:
		return cleanup.Observation{State: cleanup.Unknown, Err: err.Error()}
	case o.uid != r.ID:
		return cleanup.Observation{State: cleanup.Absent}
	}
	return cleanup.Observation{State: cleanup.Present, ID: o.uid, Labels: o.labels, Version: o.rv}
}

// Lookup gets the object holding an intent's name.
func (d *Driver) Lookup(ctx context.Context, r campaign.Resource, _ string) (driver.Found, error) {
	k, err := d.api(r.Kind)
	if err != nil {
		return driver.Found{}, err
	}
	ns, name := splitName(r.Kind, r.Name)
	var o object
	err = d.call(ctx, func() (err error) { o, err = k.get(ctx, ns, name); return err })
	switch err := classify(err); {
	case errors.Is(err, driver.ErrNotFound):
		return driver.Found{Absent: true}, nil
	case err != nil:
		return driver.Found{}, err
	}
	return driver.Found{ID: o.uid, Labels: o.labels}, nil
}

// Remove removes the journalled object in two phases: a delete with its
// UID and the observed resourceVersion as preconditions (the API server
// refuses it when either changed: driver.ErrChanged), then, once it is
// terminating, the removal of the custody finalizer, again only while its
// UID is the journalled one; then it waits until the object is gone (a
// pod's containers stopped). An agentpen killed in between finds the
// object terminating and finishes it the same way.
func (d *Driver) Remove(ctx context.Context, r campaign.Resource, seen cleanup.Observation) error {
	k, err := d.api(r.Kind)
	if err != nil {
		return err
	}
	ns, name := splitName(r.Kind, r.Name)
	if r.Kind == campaign.KindNamespace {
		// A namespace's deletion takes everything in it: never while it
		// holds what agentpen did not make (a twin of a pod, a look-alike).
		if err := d.emptyOfOthers(ctx, name); err != nil {
			return err
		}
	}
	uid := types.UID(r.ID)
	pre := &metav1.Preconditions{UID: &uid}
	if seen.Version != "" {
		pre.ResourceVersion = &seen.Version
	}
	opts := metav1.DeleteOptions{Preconditions: pre}
	if r.Kind == campaign.KindContainer {
		opts.GracePeriodSeconds = ptr(int64(1))
	}
	err = d.call(ctx, func() error { return k.del(ctx, ns, name, opts) })
	if err = classify(err); err != nil && !errors.Is(err, driver.ErrNotFound) {
		// A delete of an object already terminating (a killed agentpen's)
		// is answered as a conflict only when the object changed.
		return fmt.Errorf("delete %s %s: %w", r.Kind, r.Name, err)
	}
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var o object
		err := d.call(ctx, func() (err error) { o, err = k.get(ctx, ns, name); return err })
		switch err := classify(err); {
		case errors.Is(err, driver.ErrNotFound) || err == nil && o.uid != r.ID:
			return nil // gone (a twin may hold the name: never touched)
		case err != nil:
			return fmt.Errorf("remove %s %s: %w", r.Kind, r.Name, err)
		case o.deleting && slices.Contains(o.finalizers, Finalizer):
			// The finalizer comes off only with the object's UID and its
			// version as seen: a merge patch carrying both is refused
			// (conflict) when either changed.
			rest := slices.DeleteFunc(slices.Clone(o.finalizers), func(f string) bool { return f == Finalizer })
			patch := fmt.Sprintf(`{"metadata":{"uid":%q,"resourceVersion":%q,"finalizers":%s}}`, r.ID, o.rv, jsonStrings(rest))
			if err := d.call(ctx, func() error { return k.patch(ctx, ns, name, []byte(patch)) }); err != nil {
				if err := classify(err); !errors.Is(err, driver.ErrChanged) && !errors.Is(err, driver.ErrNotFound) {
					return fmt.Errorf("remove %s %s: the custody finalizer: %w", r.Kind, r.Name, err)
				}
			}
			continue
		case !o.deleting:
			return fmt.Errorf("remove %s %s: %w: not terminating after its delete", r.Kind, r.Name, driver.ErrChanged)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove %s %s: still terminating: %w", r.Kind, r.Name, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// emptyOfOthers refuses (driver.ErrHeld) a namespace that still holds
// an object of a kind agentpen makes, or a config map or service, other
// than what every namespace gets (the "default" service account, the
// "kube-root-ca.crt" config map): removing the namespace would remove it.
func (d *Driver) emptyOfOthers(ctx context.Context, ns string) error {
	core, nw := d.cs.CoreV1(), d.cs.NetworkingV1()
	var held []string
	add := func(kind string, names ...string) {
		for _, n := range names {
			if !(kind == "serviceaccount" && n == "default" || kind == "configmap" && n == "kube-root-ca.crt") {
				held = append(held, kind+" "+n)
			}
		}
	}
	err := d.call(ctx, func() error {
		pods, err := core.Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range pods.Items {
			add("pod", o.Name)
		}
		sas, err := core.ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range sas.Items {
			add("serviceaccount", o.Name)
		}
		secrets, err := core.Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range secrets.Items {
			add("secret", o.Name)
		}
		cms, err := core.ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range cms.Items {
			add("configmap", o.Name)
		}
		svcs, err := core.Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range svcs.Items {
			add("service", o.Name)
		}
		nps, err := nw.NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range nps.Items {
			add("networkpolicy", o.Name)
		}
		return nil
	})
	switch err := classify(err); {
	case errors.Is(err, driver.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("namespace %s: what it holds: %w", ns, err)
	case len(held) > 0:
		return driver.Kind(fmt.Sprintf("namespace %s still holds %s: removing it would remove them", ns, strings.Join(held, ", ")), driver.ErrHeld)
	}
	return nil
}

func jsonStrings(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// List lists every object of the driver's kinds carrying all the labels.
func (d *Driver) List(ctx context.Context, labels ...string) ([]cleanup.Found, error) {
	sel := strings.Join(labels, ",")
	var out []cleanup.Found
	for _, kind := range d.info.Kinds {
		k, err := d.api(kind)
		if err != nil {
			return nil, err
		}
		var l []listed
		if err := d.call(ctx, func() (err error) { l, err = k.list(ctx, sel); return err }); err != nil {
			return nil, classify(fmt.Errorf("list %s labelled %v: %w", kind, labels, err))
		}
		for _, o := range l {
			name := o.name
			if o.ns != "" {
				name = o.ns + "/" + o.name
			}
			out = append(out, cleanup.Found{Kind: kind, ID: o.uid, Name: name, Labels: o.labels})
		}
	}
	slices.SortFunc(out, func(x, y cleanup.Found) int {
		return strings.Compare(string(x.Kind)+x.Name+x.ID, string(y.Kind)+y.Name+y.ID)
	})
	return out, nil
}
