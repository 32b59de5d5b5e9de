package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// kubeconfigHelp replaces client-go's advice for a missing kubeconfig (set
// KUBERNETES_MASTER, a variable nothing reads any more) with the ways
// vipctl does find a cluster.
const kubeconfigHelp = "pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config (in a pod: the in-cluster service account is used)"

// checkNamespace refuses a --namespace no namespace can have before the
// cluster is asked: an empty one would be reported as a missing ConfigMap.
func checkNamespace(ns string) error {
	if msg := v1alpha1.NamespaceError(ns); msg != "" {
		return fmt.Errorf("--namespace %q: %s", ns, msg)
	}
	return nil
}

// restConfig finds the API the way kubectl does: an explicit kubeconfig,
// then $KUBECONFIG, then ~/.kube/config, then the in-cluster ServiceAccount.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	if env == "" {
		// client-go fixes ~/.kube/config when the process starts; look in
		// the HOME of now, as the message below says. The migration from
		// the pre-1.0 ~/.kube/.kubeconfig would write into the old HOME.
		rules.Precedence = []string{filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
		rules.MigrationRules = nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err) && env != "":
		// Files named in $KUBECONFIG that do not exist are skipped
		// silently: say so, or "set KUBECONFIG" reads as nonsense.
		return nil, fmt.Errorf("no kubeconfig: KUBECONFIG=%s names no file; %s", env, kubeconfigHelp)
	case clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("no kubeconfig: %s", kubeconfigHelp)
	case err != nil:
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}
