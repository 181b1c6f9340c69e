package campaign

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentpen/agentpen/internal/envname"
	"github.com/distribution/reference"
)

// ErrInvalid is the kind of every *ValidationError: bad launcher input.
// Nothing is created for an input that fails validation.
var ErrInvalid = errors.New("invalid")

// ValidationError names the field, the offending value and the rule.
type ValidationError struct {
	Field string
	Value string
	Msg   string
}

func (e *ValidationError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Msg)
}

// Unwrap makes every ValidationError match ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// ValidationErrors is every field a spec got wrong, in the order found.
type ValidationErrors []*ValidationError

func (e ValidationErrors) Error() string {
	msgs := make([]string, len(e))
	for i, ve := range e {
		msgs[i] = ve.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns the field errors, so errors.Is(err, ErrInvalid) holds and
// errors.As finds the first *ValidationError.
func (e ValidationErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, ve := range e {
		out[i] = ve
	}
	return out
}

func invalid(field, value, format string, args ...any) error {
	if len(value) > 80 {
		value = value[:80] + "..."
	}
	return &ValidationError{Field: field, Value: value, Msg: fmt.Sprintf(format, args...)}
}

// The patterns of ids and names, as the spec's JSON Schema states them
// too (a test in launcher holds the schema to these).
const (
	IDPattern      = `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`
	TaskIDPattern  = `^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$`
	EnvNamePattern = envname.Pattern
	// OwnerPattern is a launcher's name (CheckOwner).
	OwnerPattern = `^[a-z0-9][a-z0-9_-]{0,63}$`
	// ImagePattern is what every image reference matches: an image id, a
	// repository digest or a tag (CheckImage then applies the registry's
	// reference grammar, and refuses latest).
	ImagePattern = `^(sha256:[0-9a-f]{64}|[^@\s]+@sha256:[0-9a-f]{64}|[^@\s]+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$`
)

var (
	safeIDRe   = regexp.MustCompile(IDPattern)
	taskIDRe   = regexp.MustCompile(TaskIDPattern)
	envNameRe  = regexp.MustCompile(EnvNamePattern)
	ownerRe    = regexp.MustCompile(OwnerPattern)
	dnsLabelRe = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)
	digestRe   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// checkText is seed 004's _text: a non-empty string of at most max bytes,
// valid UTF-8, with no control character and no whitespace.
func checkText(field, v string, max int) error {
	if v == "" {
		return invalid(field, v, "must be a non-empty string")
	}
	if len(v) > max {
		return invalid(field, v, "longer than %d bytes", max)
	}
	if !utf8.ValidString(v) {
		return invalid(field, v, "not valid UTF-8")
	}
	for _, r := range v {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return invalid(field, v, "holds whitespace or a control character")
		}
	}
	return nil
}

// CheckID validates a campaign, task or attempt id: a letter or digit, then
// up to 127 of letters, digits, "_", ".", ":" and "-".
func CheckID(field, v string) error {
	if err := checkText(field, v, 128); err != nil {
		return err
	}
	if !safeIDRe.MatchString(v) {
		return invalid(field, v, "must match %s", safeIDRe)
	}
	return nil
}

// CheckOwner validates a launcher's name, the owner a campaign's begin
// record names (Record.Owner): a lower-case letter or digit, then up to
// 63 of lower-case letters, digits, "-" and "_". A name is never a
// secret: it is logged, journalled and shown.
func CheckOwner(field, v string) error {
	if !ownerRe.MatchString(v) {
		return invalid(field, v, "a launcher's name is a lower-case letter or digit, then up to 63 of lower-case letters, digits, - and _")
	}
	return nil
}

// CheckTaskID validates a task id: CheckID's alphabet plus "/" and "@", as
// in the workbench's "domain/family@N", with no "." or ".." path component.
func CheckTaskID(field, v string) error {
	if err := checkText(field, v, 128); err != nil {
		return err
	}
	if !taskIDRe.MatchString(v) {
		return invalid(field, v, "must match %s", taskIDRe)
	}
	for _, part := range strings.Split(v, "/") {
		if part == "" || part == "." || part == ".." {
			return invalid(field, v, "must not hold empty, '.' or '..' components")
		}
	}
	return nil
}

// CheckEnvName validates an environment variable name: a letter or "_",
// then up to 127 letters, digits and "_".
func CheckEnvName(field, v string) error {
	if err := checkText(field, v, 128); err != nil {
		return err
	}
	if !envNameRe.MatchString(v) {
		return invalid(field, v, "not an environment variable name")
	}
	return nil
}

// protectedEnv are the names agentpen sets itself; a launcher may not
// override them (compared in upper case).
var protectedEnv = map[string]bool{
	"DOCKER_HOST": true, "DOCKER_CONFIG": true, "DOCKER_CERT_PATH": true, "DOCKER_TLS_VERIFY": true,
	"NO_PROXY": true, "HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true,
	"PATH": true, "HOME": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true,
	"PYTHONPATH": true, "PYTHONHOME": true, "PYTHONSTARTUP": true,
}

// secretBearing reports a name that by its spelling carries a secret; such
// a variable reaches a container only by name (its value is taken from
// agentpen's environment at create time), never as a value in a spec.
// SecretBearing reports whether a variable's name says it holds a
// secret (*SECRET*, *TOKEN*, *PASSWORD*, *_API_KEY, ...): such a value
// goes by name (secret_env), never in a spec or an image.
func SecretBearing(name string) bool { return secretBearing(name) }

func secretBearing(name string) bool {
	u := strings.ToUpper(name)
	for _, m := range []string{"SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY"} {
		if strings.Contains(u, m) {
			return true
		}
	}
	return strings.HasSuffix(u, "_API_KEY") || u == "API_KEY" || strings.HasSuffix(u, "_KEY") && strings.Contains(u, "ACCESS")
}

// CheckExtraEnv validates launcher environment: names are variable names,
// not protected (agentpen's own, AGENTPEN_* or WORKBENCH_*), not
// secret-bearing (those go by name through secret_env), and values are
// printable single-line text of at most 4096 bytes.
func CheckExtraEnv(field string, env map[string]string) error {
	for k, v := range env {
		f := field + "." + k
		if err := CheckEnvName(f, k); err != nil {
			return err
		}
		u := strings.ToUpper(k)
		if protectedEnv[u] || strings.HasPrefix(u, "AGENTPEN_") || strings.HasPrefix(u, "WORKBENCH_") {
			return invalid(f, "", "protected control variable cannot be set by the launcher")
		}
		if secretBearing(k) {
			return invalid(f, "", "secret-bearing variables are passed by name only (secret_env), never by value")
		}
		if len(v) > 4096 || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) }) {
			return invalid(f, "", "value must be printable UTF-8 text of at most 4096 bytes")
		}
	}
	return nil
}

// CheckLabels validates launcher labels: keys of at most 256 bytes and
// values of at most 512, no whitespace or control characters, and no key in
// agentpen's io.agentpen.* namespace.
func CheckLabels(field string, labels map[string]string) error {
	for k, v := range labels {
		if err := checkText(field+" key", k, 256); err != nil {
			return err
		}
		if strings.HasPrefix(strings.ToLower(k), ReservedLabelPrefix) {
			return invalid(field, k, "keys under %s are agentpen's and cannot be set or overridden", ReservedLabelPrefix)
		}
		if v != "" {
			if err := checkText(field+"."+k, v, 512); err != nil {
				return err
			}
		}
	}
	return nil
}

// placeholderImages are references that name nothing pinned.
var placeholderImages = map[string]bool{"latest": true, "placeholder": true, "changeme": true, "example": true, "example/image": true, "image": true}

// ImageIDCommand is the command that prints a local image's id, the value
// a spec pins a locally built image with.
const ImageIDCommand = "docker image inspect --format '{{.Id}}' "

// CheckImage validates a spec's image reference: a local image id
// ("sha256:<64 hex>", what `docker image inspect --format '{{.Id}}'`
// prints), a repository pinned by its registry digest
// ("repo[:tag]@sha256:<64 hex>", one of the image's RepoDigests), or a
// local tag ("repo:tag"), in the registry's own reference grammar
// (github.com/distribution/reference). A tag is resolved to the id of the
// daemon's image at create time (Plan.Pin), and everything after the
// spec (the containers, the attestation) uses that id. "latest" (as a
// reference or a tag), a repository without a tag (which means latest),
// placeholders and template text are refused: latest is whatever was
// built last, never a choice.
func CheckImage(field, ref string) error {
	if err := checkText(field, ref, 1024); err != nil {
		return err
	}
	if placeholderImages[strings.ToLower(ref)] || strings.Contains(ref, "${") || strings.ContainsAny(ref, ";,<>") {
		return invalid(field, ref, "is a placeholder, not an image")
	}
	if digestRe.MatchString(ref) {
		return nil
	}
	if strings.HasPrefix(ref, "sha256:") {
		return invalid(field, ref, "an image id is sha256: and 64 lower-case hex digits; get it with: %s<repo:tag>", ImageIDCommand)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return invalid(field, ref, "is not an image reference (%v)", err)
	}
	if canonical, ok := named.(reference.Canonical); ok {
		if canonical.Digest().Algorithm() != "sha256" {
			return invalid(field, ref, "the digest must be sha256")
		}
		return nil
	}
	tagged, ok := named.(reference.Tagged)
	switch {
	case !ok:
		return invalid(field, ref, "names no tag, which means latest: give a tag (repo:tag), the local image id (%s%s) or repo@sha256:<registry digest>", ImageIDCommand, ref)
	case tagged.Tag() == "latest":
		return invalid(field, ref, "latest is whatever was built last: give another tag, the local image id (%s%s) or repo@sha256:<registry digest>", ImageIDCommand, ref)
	}
	return nil
}

// QualifiedName is a tag CheckImage accepts as a fully qualified name
// ("agentpen/workbench:dev" is "docker.io/agentpen/workbench:dev"): how
// a cluster's nodes name an image imported under that tag, and so the pin
// of a tag on a runtime that names its images only by name. "" for what
// is not a tag.
func QualifiedName(ref string) string {
	if CheckImage("image", ref) != nil || Pinned(ref) {
		return ""
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	return named.String()
}

// pinOf reports whether pin pins the tag ref: an image id, or the tag's
// qualified name (QualifiedName).
func pinOf(ref, pin string) bool {
	return IsImageID(pin) || pin != "" && pin == QualifiedName(ref)
}

// Pinned reports whether an image reference CheckImage accepts is a pin
// (an image id, or a repository digest) rather than a tag, which a
// bring-up resolves to an image id.
func Pinned(ref string) bool {
	return digestRe.MatchString(ref) || strings.Contains(ref, "@sha256:")
}

// IsImageID reports whether s is an image id: sha256: and 64 lower-case
// hex digits.
func IsImageID(s string) bool { return digestRe.MatchString(s) }

// CheckLoopbackPublish validates "IP:PORT" for a loopback-only published
// port: a numeric loopback address (never a wildcard or a name) and a port
// in 1..65535.
func CheckLoopbackPublish(field, v string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(v)
	if err != nil {
		return netip.AddrPort{}, invalid(field, v, "must be a numeric loopback IP:PORT, e.g. 127.0.0.1:18080")
	}
	if ap.Addr().IsUnspecified() {
		return netip.AddrPort{}, invalid(field, v, "must not be a wildcard address")
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return netip.AddrPort{}, invalid(field, v, "must be a loopback address")
	}
	if ap.Port() == 0 {
		return netip.AddrPort{}, invalid(field, v, "port must be 1..65535")
	}
	return ap, nil
}

// checkPort validates a TCP port.
func checkPort(field string, p int) error {
	if p < 1 || p > 65535 {
		return invalid(field, strconv.Itoa(p), "must be a TCP port 1..65535")
	}
	return nil
}

// checkMountPath validates an absolute, clean mount path (no "..", no
// wildcards, no commas, not "/").
func checkMountPath(field, p string) error {
	if err := checkText(field, p, 4096); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "/") || p == "/" || strings.ContainsAny(p, "*?,:") {
		return invalid(field, p, "must be an absolute path other than / without wildcards, commas or colons")
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return invalid(field, p, "must be a clean path without '.', '..' or '//'")
		}
	}
	return nil
}

// Catalogue answers whether the default episode server serves a task id:
// nil, or an error whose text becomes the field's message ("is not in the
// workbench catalogue ..."). workbench/tasks.Known is the one agentpen
// uses; campaign does not import the workbench.
type Catalogue func(taskID string) error

// Validate is the one validation of a spec, for agentpen up, agentpen
// spec check and the launcher API alike: NewPlan (every value), then the
// task id of every workspace that runs the default episode server against
// known (a workspace with its own command serves its own tasks). It
// returns the plan a bring-up takes (Plan.Spec is spec). The error is one
// *ValidationError, or ValidationErrors when there are several (NewPlan's
// and every unknown task id), each naming its field by path
// ("workspaces[1].task_id"). opts key the agent ids (a plan to bring up
// needs the state root's key; one only checked does not).
func Validate(spec CampaignSpec, known Catalogue, opts PlanOptions) (*Plan, error) {
	p, perr := NewPlanWith(spec, opts)
	errs := FieldErrors(perr)
	// The catalogue is consulted even when NewPlan refused another field,
	// so one answer names every unknown task.
	for i, ws := range spec.Workspaces {
		if len(ws.Command) != 0 || known == nil {
			continue
		}
		field := fmt.Sprintf("workspaces[%d].task_id", i)
		if CheckTaskID(field, ws.TaskID) != nil || slices.ContainsFunc(errs, func(e *ValidationError) bool { return e.Field == field }) {
			continue // NewPlan names it
		}
		if err := known(ws.TaskID); err != nil {
			errs = append(errs, &ValidationError{Field: field, Value: ws.TaskID, Msg: err.Error()})
		}
	}
	switch {
	case perr != nil && errs == nil:
		return nil, perr // not a field error: kept as it is
	case len(errs) == 1:
		return nil, errs[0] // as NewPlan returns one
	case len(errs) > 0:
		return nil, errs
	}
	return p, nil
}

// ParseSpec reads a spec (DecodeSpec: malformed JSON with its line and
// column, every unknown field, a duplicate key) and validates it
// (Validate).
func ParseSpec(r io.Reader, known Catalogue, opts PlanOptions) (*Plan, error) {
	spec, err := DecodeSpec(r)
	if err != nil {
		return nil, err
	}
	return Validate(spec, known, opts)
}

// FieldErrors flattens err into its field errors (nil for none).
func FieldErrors(err error) ValidationErrors {
	var list ValidationErrors
	var one *ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &list):
		return slices.Clone(list)
	case errors.As(err, &one):
		return ValidationErrors{one}
	}
	return nil
}

// CheckIntegrity checks a workspace's integrity section: git_root an
// absolute clean path outside the kernel's and agentpen's own trees
// (/proc, /sys, /run: a walk there would read the runtime, not the
// task), each base a 40-hex commit of a clean path at or under it, at
// most MaxIntegrityBases, each forbidden path absolute and clean, and
// each allowed egress class one of EgressClasses, once.
func CheckIntegrity(field string, s IntegritySpec) error {
	root := s.Root()
	if err := checkMountPath(field+".git_root", root); err != nil {
		return err
	}
	for _, sys := range []string{"/proc", "/sys", "/run", "/dev"} {
		if root == sys || strings.HasPrefix(root, sys+"/") {
			return invalid(field+".git_root", root, "must not be under %s", sys)
		}
	}
	if len(s.Bases) > MaxIntegrityBases {
		return invalid(field+".bases", fmt.Sprint(len(s.Bases)), "at most %d repositories", MaxIntegrityBases)
	}
	for _, p := range slices.Sorted(maps.Keys(s.Bases)) {
		f := field + ".bases[" + strconv.Quote(p) + "]"
		if p != root {
			if err := checkMountPath(f, p); err != nil {
				return err
			}
			if !strings.HasPrefix(p, root+"/") {
				return invalid(f, p, "must be git_root (%s) or a path under it", root)
			}
		}
		if b := s.Bases[p]; len(b) != 40 || strings.Trim(b, "0123456789abcdef") != "" {
			return invalid(f, b, "must be a commit: 40 lower-case hex digits")
		}
	}
	if len(s.ForbiddenPaths) > MaxIntegrityBases {
		return invalid(field+".forbidden_paths", fmt.Sprint(len(s.ForbiddenPaths)), "at most %d paths", MaxIntegrityBases)
	}
	for i, p := range s.ForbiddenPaths {
		if err := checkMountPath(fmt.Sprintf("%s.forbidden_paths[%d]", field, i), p); err != nil {
			return err
		}
	}
	for i, c := range s.AllowedEgress {
		f := fmt.Sprintf("%s.allowed_egress[%d]", field, i)
		if !slices.Contains(EgressClasses, c) {
			return invalid(f, c, "must be one of %s", strings.Join(EgressClasses, ", "))
		}
		if slices.Index(s.AllowedEgress, c) != i {
			return invalid(f, c, "named twice")
		}
	}
	return nil
}
