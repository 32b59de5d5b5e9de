package v1alpha1

import (
	"fmt"
	"strings"

	"github.com/vipctl/vipctl/pkg/version"
)

type imageField struct{ name, ref string }

// fields lists the images under their field names, for the checks that
// look at each.
func (im *Images) fields() []imageField {
	return []imageField{{"keepalived", im.Keepalived}, {"haproxy", im.Haproxy}, {"vipctl", im.Vipctl}}
}

// UnpublishedImageWarning says which of spec.images name the image of
// this vipctl when it is a development build: that image exists only on
// the machine that built it (make image), never in a registry, so nodes
// could not pull it and the static pods would not start. Empty for a
// release's image (make release, which a maintainer publishes) and when
// spec.images names other images (the user's mirror). Call it on a
// defaulted config.
func (c *ClusterVIPs) UnpublishedImageWarning() string {
	if version.IsRelease(version.Get()) {
		return ""
	}
	own := version.Image()
	var paths []string
	for _, f := range c.Spec.Images.fields() {
		if f.ref == own {
			paths = append(paths, "spec.images."+f.name)
		}
	}
	if len(paths) == 0 {
		return ""
	}
	list, verb := paths[0], "names"
	if n := len(paths); n > 1 {
		list, verb = strings.Join(paths[:n-1], ", ")+" and "+paths[n-1], "name"
	}
	return fmt.Sprintf("%s %s %s, the image of this development build of vipctl, which no registry publishes: the nodes could not pull it. Use a release of vipctl (docs/image.md), or push the image you built (make image) to your registry and set spec.images to it",
		list, verb, own)
}
