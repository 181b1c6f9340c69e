//go:build kube

package kube_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/kube"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	"github.com/agentpen/agentpen/internal/testkit/testlatency"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// benchPods is the size of the benchmark's campaign: past what one node
// takes (its pods stay Pending: no node, no scheduler).
const benchPods = 256

// BenchmarkKubeCampaign256 brings up and removes a campaign of 256
// workspaces against the API server through the engine (every object
// journalled, with the custody finalizer; every removal with UID and
// resourceVersion preconditions, the finalizer's removal, and an
// absence check), beside raw client-go making the same calls per object
// at the same concurrency without journal or checks (raw-up-, raw-down-).
//
//	make kube-bench, or: go test -tags kube -run '^$' -bench KubeCampaign -benchtime 3x ./adapter/kube
func BenchmarkKubeCampaign256(b *testing.B) {
	d := open(b)
	kube.LeaveWorkspacesUnplaced(d)
	_, rc := kuberig.Client(b)
	// Raw client-go under the driver's own client-side limits (a
	// default client waits at 5 requests a second).
	rc.QPS, rc.Burst = float32(10*kube.DefaultConcurrency), 20*kube.DefaultConcurrency
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	h := engineB(b, pending{d})
	var up, rawUp, down, rawDown testlatency.Samples
	for r := range b.N {
		id := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano()%1e9, r)
		b.Cleanup(func() { h.Cleanup(context.Background(), id) })
		s := wideSpec(b, d, id, benchPods)
		start := time.Now()
		if _, err := h.BringUp(b.Context(), s); err != nil {
			b.Fatal(err)
		}
		up = append(up, time.Since(start))
		// The raw calls make the very pods the engine made.
		made, err := cs.CoreV1().Pods("").List(b.Context(), metav1.ListOptions{LabelSelector: campaign.LabelCampaign + "=" + id})
		if err != nil || len(made.Items) != benchPods+1 {
			b.Fatalf("the campaign's pods: %d (%v)", len(made.Items), err)
		}
		start = time.Now()
		if rep, err := h.Cleanup(b.Context(), id); err != nil || !rep.OK {
			b.Fatalf("removal: %v", err)
		}
		down = append(down, time.Since(start))

		ns := fmt.Sprintf("agentpen-raw-%d-%d", time.Now().UnixNano()%1e9, r)
		start = time.Now()
		uids, err := rawCreate(b.Context(), cs, ns, made.Items)
		rawUp = append(rawUp, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if err := rawRemove(b.Context(), cs, ns, uids); err != nil {
			b.Fatal(err)
		}
		rawDown = append(rawDown, time.Since(start))
		b.Logf("round %d: up %v (raw %v), down %v (raw %v)", r, up[len(up)-1], rawUp[len(rawUp)-1], down[len(down)-1], rawDown[len(rawDown)-1])
	}
	up.Report(b, "up-")
	rawUp.Report(b, "raw-up-")
	down.Report(b, "down-")
	rawDown.Report(b, "raw-down-")
}

// rawPolicies are the network policies a campaign has.
var rawPolicies = []string{"deny-all", "workspaces-to-grader", "grader-from-workspaces"}

// rawCreate makes what a campaign is, by direct calls at the driver's
// concurrency: the namespace (at the same Pod Security level), its
// service account, secret and three policies, and the pods (their specs
// and labels, none placed on a node), each with the finalizer.
func rawCreate(ctx context.Context, cs kubernetes.Interface, ns string, pods []corev1.Pod) (map[string]types.UID, error) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{kube.Finalizer}, Labels: map[string]string{"bench": ns}}
	}
	uids := map[string]types.UID{}
	var mu sync.Mutex
	o, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Finalizers: []string{kube.Finalizer},
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": kube.PodSecurityLevel, "pod-security.kubernetes.io/warn": kube.PodSecurityLevel}}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	uids["ns"] = o.UID
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(kube.DefaultConcurrency)
	g.Go(func() error {
		o, err := cs.CoreV1().ServiceAccounts(ns).Create(gctx, &corev1.ServiceAccount{ObjectMeta: meta("agentpen")}, metav1.CreateOptions{})
		if err == nil {
			mu.Lock()
			uids["sa"] = o.UID
			mu.Unlock()
		}
		return err
	})
	g.Go(func() error {
		o, err := cs.CoreV1().Secrets(ns).Create(gctx, &corev1.Secret{ObjectMeta: meta("agentpen-grader")}, metav1.CreateOptions{})
		if err == nil {
			mu.Lock()
			uids["secret"] = o.UID
			mu.Unlock()
		}
		return err
	})
	for _, name := range rawPolicies {
		g.Go(func() error {
			o, err := cs.NetworkingV1().NetworkPolicies(ns).Create(gctx, &networkingv1.NetworkPolicy{ObjectMeta: meta(name)}, metav1.CreateOptions{})
			if err == nil {
				mu.Lock()
				uids["np/"+name] = o.UID
				mu.Unlock()
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return uids, err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(kube.DefaultConcurrency)
	for _, t := range pods {
		g.Go(func() error {
			m := meta(t.Name)
			m.Labels = t.Labels
			spec := *t.Spec.DeepCopy()
			spec.NodeName = ""
			o, err := cs.CoreV1().Pods(ns).Create(gctx, &corev1.Pod{ObjectMeta: m, Spec: spec}, metav1.CreateOptions{})
			if err == nil {
				mu.Lock()
				uids["pod/"+t.Name] = o.UID
				mu.Unlock()
			}
			return err
		})
	}
	return uids, g.Wait()
}

// rawRemove removes them as the driver does, without its observations:
// a delete with the UID as precondition, the finalizer's removal, and a
// get until the object is gone; the pods, then the namespace's objects,
// then the namespace.
func rawRemove(ctx context.Context, cs kubernetes.Interface, ns string, uids map[string]types.UID) error {
	strip := []byte(`{"metadata":{"finalizers":null}}`)
	gone := func(get func() error) error {
		for {
			err := get()
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(kube.DefaultConcurrency)
	for k, uid := range uids {
		name, ok := strings.CutPrefix(k, "pod/")
		if !ok {
			continue
		}
		g.Go(func() error {
			pods := cs.CoreV1().Pods(ns)
			if err := pods.Delete(gctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
				return err
			}
			if _, err := pods.Patch(gctx, name, types.MergePatchType, strip, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return gone(func() error { _, err := pods.Get(gctx, name, metav1.GetOptions{}); return err })
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, name := range rawPolicies {
		nps := cs.NetworkingV1().NetworkPolicies(ns)
		if err := nps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		if _, err := nps.Patch(ctx, name, types.MergePatchType, strip, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := gone(func() error { _, err := nps.Get(ctx, name, metav1.GetOptions{}); return err }); err != nil {
			return err
		}
	}
	for _, step := range []struct {
		del   func() error
		patch func() error
		get   func() error
	}{
		{func() error { return cs.CoreV1().ServiceAccounts(ns).Delete(ctx, "agentpen", metav1.DeleteOptions{}) },
			func() error {
				_, err := cs.CoreV1().ServiceAccounts(ns).Patch(ctx, "agentpen", types.MergePatchType, strip, metav1.PatchOptions{})
				return err
			},
			func() error {
				_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "agentpen", metav1.GetOptions{})
				return err
			}},
		{func() error { return cs.CoreV1().Secrets(ns).Delete(ctx, "agentpen-grader", metav1.DeleteOptions{}) },
			func() error {
				_, err := cs.CoreV1().Secrets(ns).Patch(ctx, "agentpen-grader", types.MergePatchType, strip, metav1.PatchOptions{})
				return err
			},
			func() error {
				_, err := cs.CoreV1().Secrets(ns).Get(ctx, "agentpen-grader", metav1.GetOptions{})
				return err
			}},
		{func() error { return cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) },
			func() error {
				_, err := cs.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, strip, metav1.PatchOptions{})
				return err
			},
			func() error { _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); return err }},
	} {
		if err := step.del(); err != nil {
			return err
		}
		if err := step.patch(); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := gone(step.get); err != nil {
			return err
		}
	}
	return nil
}
