//go:build node

package node

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// emergencyHeading opens the README's emergency box: the off switches the
// node suite runs as written, so the box and its proof cannot drift.
const emergencyHeading = "## Turn it off when the webhook is down"

// emergencyRow is one row of the box: the situation it is for and its
// commands, in order, with NS standing for the namespace to name.
type emergencyRow struct {
	situation string
	commands  []string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// emergencyRows reads the box's table from the README.
func emergencyRows(t *testing.T) []emergencyRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, box, found := strings.Cut(string(b), "\n"+emergencyHeading+"\n")
	require.True(t, found, "the README has the section %q", emergencyHeading)
	if next := strings.Index(box, "\n## "); next >= 0 {
		box = box[:next]
	}
	var rows []emergencyRow
	for _, line := range strings.Split(box, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(line, ">"))
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| ") || len(cells) < 2 || strings.HasPrefix(cells[0], "| situation") {
			continue
		}
		row := emergencyRow{situation: strings.TrimPrefix(cells[0], "| ")}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			row.commands = append(row.commands, m[1])
		}
		require.NotEmpty(t, row.commands, "a command in the row %q", row.situation)
		rows = append(rows, row)
	}
	return rows
}

// rowFor returns the one row whose situation contains what.
func rowFor(t *testing.T, rows []emergencyRow, what string) emergencyRow {
	t.Helper()
	var found []emergencyRow
	for _, r := range rows {
		if strings.Contains(r.situation, what) {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "one row of the README's emergency box for %q", what)
	return found[0]
}

var nsWord = regexp.MustCompile(`\bNS\b`)

// run runs the row's commands as written through a shell, with the
// cluster's kubectl as `kubectl` and the admin's kubeconfig, NS replaced
// by ns.
func (r emergencyRow) run(t *testing.T, ns string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Symlink(kubectlBin, filepath.Join(dir, "kubectl")))
	for _, c := range r.commands {
		c = nsWord.ReplaceAllString(c, ns)
		cmd := exec.Command("sh", "-c", c)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfigPath)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Run(), "%s\n%s", c, out.String())
		t.Logf("%s\n%s", c, out.String())
	}
}

// keepRegistration puts the guard's webhook configuration back as it is
// now when restore is called, as a helm upgrade would: the rows patch or
// delete it.
func keepRegistration(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	saved := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: releaseName}, saved))
	return func() {
		t.Helper()
		now := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		err := admin.Get(ctx, client.ObjectKey{Name: releaseName}, now)
		if apierrors.IsNotFound(err) {
			again := saved.DeepCopy()
			again.ResourceVersion, again.UID, again.ManagedFields = "", "", nil
			require.NoError(t, admin.Create(ctx, again))
			return
		}
		require.NoError(t, err)
		now.Webhooks = saved.Webhooks
		require.NoError(t, admin.Update(ctx, now))
	}
}
