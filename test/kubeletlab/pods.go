package kubeletlab

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Pods are the pods the kubelet runs, with their status, from its /pods.
func (n *Node) Pods(ctx context.Context) ([]corev1.Pod, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(n.NodeIP, strconv.Itoa(kubeletPort))+"/pods", nil)
	if err != nil {
		return nil, err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: kubelet /pods: %w", n.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var list corev1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("%s: kubelet /pods: %w", n.Name, err)
	}
	return list.Items, nil
}

// Pod is the kubelet's view of the static pod named name (the manifest's
// name; the kubelet appends -<node>).
func (n *Node) Pod(ctx context.Context, name string) (*corev1.Pod, error) {
	pods, err := n.Pods(ctx)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == name+"-"+n.Name {
			return &pods[i], nil
		}
	}
	return nil, nil
}

// PodReady reports whether the pod is Ready in the kubelet's view.
func PodReady(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ContainerID is the containerd ID of a running container of the pod.
func ContainerID(p *corev1.Pod, container string) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container && s.State.Running != nil {
			return strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	return ""
}

// KillContainer SIGKILLs a container's main process through containerd,
// as a crash would end it; the kubelet restarts it.
func (n *Node) KillContainer(id string) error {
	_, err := n.Exec("ctr", "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id)
	return err
}

// Logs is the tail of the node's kubelet and containerd logs, for failure
// messages.
func (n *Node) Logs(lines int) string {
	var b strings.Builder
	for _, p := range []*proc{n.kubelet, n.containerd} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s %s\n%s\n", n.Name, filepath.Base(p.log), p.logTail(lines))
		}
	}
	return b.String()
}

// ContainerLogs is the tail of every container log of the node.
func (n *Node) ContainerLogs(lines int) string {
	var b strings.Builder
	n.eachContainerLog(func(p, rel string) {
		fmt.Fprintf(&b, "--- %s %s\n%s\n", n.Name, rel, tail(p, lines))
	})
	return b.String()
}

// eachContainerLog calls f with the path of every container log file of
// the node and that path under /var/log/pods.
func (n *Node) eachContainerLog(f func(path, rel string)) {
	root := filepath.Join(n.dir, "root", "/var/log/pods")
	_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			f(p, strings.TrimPrefix(p, root))
		}
		return nil
	})
}

// ContainerLogsBetween is every container log line of the node written
// from from to to (the CRI log's own timestamps), at most limit lines a
// container, for a failure that happened in between.
func (n *Node) ContainerLogsBetween(from, to time.Time, limit int) string {
	return n.ContainerLogsWhere(from, to, limit, func(string) bool { return true })
}

// ContainerLogsWhere is ContainerLogsBetween of the lines keep keeps: a
// window's story without the lines every second repeats (a backup's
// "discarding" of each advert, haproxy's health checks) crowding out its
// state changes.
func (n *Node) ContainerLogsWhere(from, to time.Time, limit int, keep func(line string) bool) string {
	var b strings.Builder
	n.eachContainerLog(func(p, rel string) {
		data, _ := os.ReadFile(p)
		var in []string
		for _, line := range strings.Split(string(data), "\n") {
			stamp, _, _ := strings.Cut(line, " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err == nil && !at.Before(from) && !at.After(to) && keep(line) {
				in = append(in, line)
			}
		}
		if len(in) == 0 {
			return
		}
		if len(in) > limit {
			in = append(in[:limit], fmt.Sprintf("(%d more)", len(in)-limit))
		}
		fmt.Fprintf(&b, "--- %s %s from %s to %s\n%s\n", n.Name, rel,
			from.Format("15:04:05.000"), to.Format("15:04:05.000"), strings.Join(in, "\n"))
	})
	return b.String()
}

// SaveLogs copies the node's kubelet and containerd logs and every
// container log into dir, for a failed test's post-mortem.
func (n *Node) SaveLogs(dir string) error {
	return exec.Command("sh", "-c", `mkdir -p "$2" && cp -a "$1"/*.log "$2"/ 2>/dev/null; cp -a "$1"/root/var/log/pods "$2"/pods 2>/dev/null; true`,
		"sh", n.dir, dir).Run()
}

// ContainerStates tells, for a pod that is not Ready, where each of its
// containers is (init containers first): "render done", "keepalived
// waiting (PodInitializing)", "runtimecfg running since 10:52:01, not
// ready".
func ContainerStates(p *corev1.Pod) string {
	var out []string
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		s := cs.Name
		switch st := cs.State; {
		case st.Waiting != nil:
			s += " waiting (" + st.Waiting.Reason + ")"
		case st.Terminated != nil && st.Terminated.ExitCode == 0:
			s += " done"
		case st.Terminated != nil:
			s += fmt.Sprintf(" exited %d (%s)", st.Terminated.ExitCode, st.Terminated.Reason)
		case st.Running != nil && cs.Ready:
			s += " ready"
		case st.Running != nil:
			s += " running since " + st.Running.StartedAt.Format("15:04:05") + ", not ready"
		default:
			s += " unknown"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "no container status"
	}
	return strings.Join(out, ", ")
}
