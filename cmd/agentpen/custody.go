package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/beneath"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/store"
)

// signingKeyEnv names the operator's signing key file when --signing-key
// does not.
const signingKeyEnv = "AGENTPEN_SIGNING_KEY"

// keyFlags are the flags that choose the state root and the signing key.
type keyFlags struct {
	stateRoot  string
	signingKey string
}

func (k *keyFlags) register(fs *cli.FlagSet, getenv func(string) string) {
	fs.StringVar(&k.stateRoot, "state-root", defaultStateRoot(getenv), "directory holding one state directory (journal, spec) per campaign")
	fs.StringVar(&k.signingKey, "signing-key", getenv(signingKeyEnv),
		"ed25519 private key (PEM, unencrypted PKCS #8; this user's, mode 0600) the reports are signed with, instead of the state root's own (default $"+signingKeyEnv+")")
}

// operatorKey reads the key --signing-key names; nil when none does.
func (k *keyFlags) operatorKey() (ed25519.PrivateKey, error) {
	if k.signingKey == "" {
		return nil, nil
	}
	b, err := readPrivateFile("--signing-key", k.signingKey, 64<<10)
	if err != nil {
		return nil, err
	}
	key, err := custody.ParsePrivateKey(b)
	if err != nil {
		return nil, &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("--signing-key %s: %w", k.signingKey, err)}
	}
	return key, nil
}

// readPrivateFile reads the file at path that flag names and that must be
// a secret's: a regular file owned by this user, readable by no other, at
// most max bytes.
func readPrivateFile(flag, path string, max int64) ([]byte, error) {
	bad := func(format string, args ...any) error {
		return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("%s %s: "+format, append([]any{flag, path}, args...)...)}
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, bad("%v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, bad("%v", err)
	}
	switch st, _ := fi.Sys().(*syscall.Stat_t); {
	case !fi.Mode().IsRegular():
		return nil, bad("not a regular file")
	case st != nil && int(st.Uid) != os.Geteuid():
		return nil, bad("owned by uid %d, not by this user (uid %d); it must be this user's alone: chown %d %s", st.Uid, os.Geteuid(), os.Geteuid(), path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, bad("mode %#o lets others read it; want 0600 (chmod 600 %s)", fi.Mode().Perm(), path)
	case fi.Size() > max:
		return nil, bad("%d bytes: more than such a file holds", fi.Size())
	}
	return io.ReadAll(f)
}

// keyReport is agentpen key --json.
type keyReport struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
	// Source is where the private key is: the state root's key file, or
	// the operator's.
	Source string `json:"source"`
}

func keyCmd(_ context.Context, args []string, stdout, _ io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "key", "[flags]",
		"Prints the public key the reports' statements are signed with, as PEM (SubjectPublicKeyInfo):\n"+
			"what agentpen verify --key and cosign verify-blob-attestation --key read. The key is the\n"+
			"state root's own (keys/signing.key, an ed25519 seed, mode 0600, made at first use: by this\n"+
			"command too), or the operator's (--signing-key). --json adds its key id (the DSSE keyid).\n"+
			"A state root that does not exist is refused (a mistyped one would get a key of its own)\n"+
			"unless --create asks for it.\n"+
			"Exit status: 0, or 2 on a key or state root that cannot be used.", stdout)
	var kf keyFlags
	kf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print the key id, the PEM and where the key is, as JSON")
	create := fs.Bool("create", false, "make the state root (and its key) when it does not exist")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	key, err := kf.operatorKey()
	if err != nil {
		return err
	}
	src := "--signing-key " + kf.signingKey
	if key == nil {
		if _, err := os.Lstat(kf.stateRoot); errors.Is(err, os.ErrNotExist) && !*create {
			return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("state root %s does not exist: no campaign's reports were signed there; "+
				"name the root your campaigns are in (--state-root), or pass --create to make it and its key", kf.stateRoot)}
		}
		root, err := store.CreateRoot(kf.stateRoot)
		if err != nil {
			return err
		}
		defer root.Close()
		if key, err = root.SigningKey(); err != nil {
			return err
		}
		src = root.KeyPath(store.SigningKeyName)
	}
	pub := key.Public().(ed25519.PublicKey)
	if *asJSON {
		return cli.WriteJSON(stdout, keyReport{KeyID: custody.KeyID(pub), PublicKey: string(custody.MarshalPublicKey(pub)), Source: src})
	}
	_, err = stdout.Write(custody.MarshalPublicKey(pub))
	return err
}

// errNotVerified is a verification that failed; the command printed why.
var errNotVerified = fmt.Errorf("not verified: %w", cli.ErrReported)

func verifyCmd(ctx context.Context, args []string, stdout, _ io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "verify", "[flags] FILE|CAMPAIGN_ID",
		"Verifies a campaign's signed reports (CAMPAIGN_ID, in the state root), or one report (FILE: a\n"+
			"report or its .dsse.json envelope, in a campaign's directory or a copy of it) without Docker:\n"+
			"  journal.chain      every journal record follows the one before (sequence, SHA-256 of its line)\n"+
			"  <report>.envelope  the envelope beside the report is the one the journal recorded\n"+
			"  <report>.signature it is signed by the key (--key; default the state root's, or --signing-key's)\n"+
			"  <report>.statement it holds an in-toto Statement v1 of the report's predicate type\n"+
			"  <report>.predicate the report file is the signed predicate\n"+
			"  <report>.subject.* each subject's SHA-256 is its file's (the journal's over the lines it\n"+
			"                     covers; an image's is the id the report records)\n"+
			"  <report>.journal   the report's journal record is the line after those, with its digest,\n"+
			"                     in the generation (and instance) the journal began\n"+
			"  <report>.follows   a cleanup names the last attestation of its generation before it\n"+
			"  journal.tail       (CAMPAIGN_ID) nothing but notes, and a rollback's record after its\n"+
			"                     cleanup, follows the last record a verified statement covers\n"+
			"Prints each failed check, or every check with --json.\n"+
			"Exit status: 0 when every check holds, 1 when one does not, 2 on bad input (no such campaign\n"+
			"or file, no key to verify with).", stdout)
	var kf keyFlags
	kf.register(fs, getenv)
	keyFile := fs.String("key", "", "public key (PEM, as agentpen key prints it) to verify with")
	asJSON := fs.Bool("json", false, "print every check as JSON")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	target := pos[0]
	var (
		files custody.Files
		opts  custody.Options
		what  string
	)
	// The state root is read for a campaign id, and for its public key
	// when no other key is given; a copied report with --key needs none.
	var root *store.Root
	openRoot := func() (*store.Root, error) {
		if root == nil {
			r, err := store.OpenRoot(kf.stateRoot)
			if err != nil {
				return nil, err
			}
			root = r
		}
		return root, nil
	}
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	if isFileArg(target) {
		dir, only, err := reportFile(target)
		if err != nil {
			return err
		}
		d, err := beneath.Open(dir, nil)
		if err != nil {
			return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("%s: %w", target, err)}
		}
		defer d.Close()
		files, opts, what = d, custody.Options{Only: only}, "report "+filepath.Join(dir, only)
	} else {
		r, err := openRoot()
		if err != nil {
			return err
		}
		c, err := r.Open(target)
		if err != nil {
			return err
		}
		defer c.Close()
		files, what = c, "campaign "+target+" ("+c.Path+")"
	}
	pub, err := verifyKey(openRoot, &kf, *keyFile)
	if err != nil {
		return err
	}
	res := custody.Verify(ctx, files, pub, opts)
	if *asJSON {
		if err := cli.WriteJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printVerification(stdout, what, res)
	}
	if !res.OK {
		return errNotVerified
	}
	return nil
}

// isFileArg says whether verify's argument names a file rather than a
// campaign id: a path, or a report's (or envelope's) file name.
func isFileArg(arg string) bool {
	return strings.ContainsRune(arg, '/') || strings.HasSuffix(arg, ".json")
}

// reportFile is the directory and the report's name of a report or
// envelope path.
func reportFile(path string) (string, string, error) {
	name := filepath.Base(path)
	if strings.HasSuffix(name, ".dsse.json") {
		name = strings.TrimSuffix(name, ".dsse.json") + ".json"
	}
	if _, ok := custody.KindOf(name, ""); !ok {
		return "", "", &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("%s: not a report (<kind>-<generation>-<n>.json) or its envelope (.dsse.json)", path)}
	}
	return filepath.Dir(path), name, nil
}

// verifyKey is the public key to verify with: --key's, else that of
// --signing-key, else the state root's.
func verifyKey(openRoot func() (*store.Root, error), kf *keyFlags, keyFile string) (ed25519.PublicKey, error) {
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("--key: %w", err)}
		}
		pub, err := custody.ParsePublicKey(b)
		if err != nil {
			return nil, &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("--key %s: %w", keyFile, err)}
		}
		return pub, nil
	}
	if key, err := kf.operatorKey(); err != nil || key != nil {
		if err != nil {
			return nil, err
		}
		return key.Public().(ed25519.PublicKey), nil
	}
	root, err := openRoot()
	if err != nil {
		return nil, err
	}
	pub, err := root.PublicKey()
	if errors.Is(err, store.ErrNoSigningKey) {
		return nil, &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("no key to verify with: %w; pass --key PUB.pem (agentpen key prints the signer's)", err)}
	}
	return pub, err
}

// printVerification is verify's human answer: a verdict line, then one
// line per failed check.
func printVerification(w io.Writer, what string, res *custody.Result) {
	if res.OK {
		fmt.Fprintf(w, "verified: %s: %d reports, %d checks hold (key %s)\n", what, len(res.Reports), len(res.Checks), res.KeyID)
		return
	}
	fmt.Fprintf(w, "NOT verified: %s: %d of %d checks failed (key %s)\n", what, len(res.Failed), len(res.Checks), res.KeyID)
	for _, c := range res.Checks {
		if !c.OK {
			fmt.Fprintf(w, "  %s: %s\n", c.ID, c.Detail)
		}
	}
}

func checksCmd(_ context.Context, args []string, stdout, _ io.Writer, _ func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "checks", "[--json|--markdown]",
		"Lists every check an attestation report can hold: its id ([i] stands for a workspace's or a\n"+
			"network's index, <key> for each ownership label), its section, what a pass proves, the\n"+
			"evidence it is judged from, and what it cannot prove. docs/checks.md is --markdown's output.", stdout)
	asJSON := fs.Bool("json", false, "print the catalogue as JSON")
	asMD := fs.Bool("markdown", false, "print the catalogue as the Markdown page docs/checks.md")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	cat := attest.Catalogue()
	switch {
	case *asJSON && *asMD:
		return cli.Usagef("--json and --markdown: pick one")
	case *asJSON:
		return cli.WriteJSON(stdout, cat)
	case *asMD:
		_, err := io.WriteString(stdout, checksMarkdown(cat))
		return err
	}
	for _, c := range cat {
		fmt.Fprintf(stdout, "%s  (%s; %s)\n  proves:        %s\n  evidence:      %s\n", c.ID, c.Section, strings.Join(c.Runtimes, ", "), c.Proves, c.Evidence)
		if c.OnCluster != "" {
			fmt.Fprintf(stdout, "  on a cluster:  %s\n", c.OnCluster)
		}
		fmt.Fprintf(stdout, "  cannot prove:  %s\n", c.CannotProve)
	}
	return nil
}

// checksMarkdown is docs/checks.md.
func checksMarkdown(cat []attest.CheckInfo) string {
	var b strings.Builder
	b.WriteString("# The attestation's checks\n\n" +
		"<!-- Generated by `agentpen checks --markdown`; a test holds this page equal to it. -->\n\n" +
		"Every check an attestation report (`attestation-<generation>-<n>.json`, signed beside it) can hold,\n" +
		"with what a pass proves, the evidence it is judged from, and what it cannot prove. `[i]` stands for\n" +
		"a workspace's or a network's index, `<key>` for each ownership label (`io.agentpen.*`). A report is\n" +
		"ok only when every check it holds passed; missing evidence fails the checks that needed it.\n" +
		"`agentpen checks --json` prints the same catalogue for machines. A check is made on the runtimes\n" +
		"it names: a rootless Docker daemon (`docker`), a Kubernetes cluster (`kubernetes`); where the\n" +
		"evidence names Docker's answers, \"on a cluster\" says what it is judged from there\n" +
		"([kubernetes.md](kubernetes.md)).\n\n" +
		"| check | section | runtimes | proves | evidence | cannot prove |\n|---|---|---|---|---|---|\n")
	esc := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, c := range cat {
		evidence := esc.Replace(c.Evidence)
		if c.OnCluster != "" {
			evidence += "; on a cluster: " + esc.Replace(c.OnCluster)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", c.ID, c.Section, strings.Join(c.Runtimes, ", "), esc.Replace(c.Proves), evidence, esc.Replace(c.CannotProve))
	}
	return b.String()
}

const reportUsage = `Usage:
  agentpen report schema KIND   print the JSON Schema (draft 2020-12) of a report of KIND,
                                every field described: %s

A report is the predicate of the in-toto statement signed beside it
(<kind>-<generation>-<n>.dsse.json); agentpen verify checks both.
Exit status: 0, or 2 on a bad command line or an unknown KIND.
`

// reportCmd is "agentpen report": the reports' schemas.
func reportCmd(_ context.Context, args []string, stdout, stderr io.Writer, _ func(string) string) error {
	usage := fmt.Sprintf(reportUsage, strings.Join(custody.SchemaKinds(), ", "))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &cli.UsageError{Msg: "missing subcommand: schema", Hint: "agentpen report --help"}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "schema":
		fs := cli.NewFlagSet("agentpen", "report schema", "KIND",
			"Prints the JSON Schema (draft 2020-12) of a report of KIND ("+strings.Join(custody.SchemaKinds(), ", ")+"), every field described.", stdout)
		pos, err := fs.Parse(args[1:], 1, 1)
		if err != nil {
			return cli.InCommand("agentpen report schema", err)
		}
		b, err := custody.Schema(pos[0])
		if err != nil {
			return cli.InCommand("agentpen report schema", &cli.UsageError{Msg: err.Error()})
		}
		_, err = stdout.Write(b)
		return err
	}
	return &cli.UsageError{Msg: fmt.Sprintf("unknown subcommand %q", args[0]), Hint: "agentpen report --help"}
}
