package render

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestExampleCommentsStateTheirAdverts: an example whose comment names its
// advertisement interval ("100 ms adverts") renders exactly that in every
// VRRP instance. examples/multicast-fast.yaml said 200 ms while the fast
// profile renders 100 ms.
func TestExampleCommentsStateTheirAdverts(t *testing.T) {
	t.Parallel()
	claim := regexp.MustCompile(`(?m)^#.*?\b(\d+) ms adverts`)
	advert := regexp.MustCompile(`(?m)^\s*advert_int (\S+)$`)
	checked := 0
	for _, e := range fixture.Examples(t) {
		text, err := os.ReadFile(filepath.Join("..", "..", "examples", e))
		if err != nil {
			t.Fatal(err)
		}
		m := claim.FindSubmatch(text)
		if m == nil {
			continue
		}
		checked++
		ms, _ := strconv.Atoi(string(m[1]))
		want := strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64)
		for node, files := range renderExample(t, e).files {
			for _, got := range advert.FindAllSubmatch(files[0].Data, -1) {
				if string(got[1]) != want {
					t.Errorf("%s says %d ms adverts, but %s's keepalived.conf has advert_int %s", e, ms, node, got[1])
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no example states its advertisement interval: the pattern no longer matches the comments")
	}
}
