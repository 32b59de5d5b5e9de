package testapiserver

import (
	"encoding/json"
	"fmt"
	"os/exec"
)

// moduleDir asks the go command where a dependency of the main module lives.
func moduleDir(path string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-json", path).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", path, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Dir == "" {
		return "", fmt.Errorf("module %s is not downloaded (go mod download)", path)
	}
	return m.Dir, nil
}
