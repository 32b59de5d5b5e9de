package cluster

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// DescribeAPIError makes a permission problem say so up front; the API's
// own message names the user, verb and resource.
func DescribeAPIError(err error) string {
	if err == nil {
		return ""
	}
	if isForbidden(err) {
		return "permission missing (check the vipctl RBAC for system:nodes): " + err.Error()
	}
	if apierrors.IsUnauthorized(err) {
		return "credentials rejected (check the node kubeconfig): " + err.Error()
	}
	return err.Error()
}

// isForbidden also sees through the wrapping reflector errors add.
func isForbidden(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code == 403
	}
	return apierrors.IsForbidden(err)
}
