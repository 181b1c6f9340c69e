package custody

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// The in-toto and DSSE names a statement and its envelope carry.
const (
	// StatementType is an in-toto Statement v1's _type.
	StatementType = "https://in-toto.io/Statement/v1"
	// PayloadType is the DSSE payload type of an in-toto statement.
	PayloadType = "application/vnd.in-toto+json"
)

// Predicate types: agentpen's reports, one URI each, versioned with the
// report's schema.
const (
	PredicateAttestation = "https://agentpen.dev/predicates/attestation/v1"
	PredicateCleanup     = "https://agentpen.dev/predicates/cleanup/v1"
)

// Kind is one kind of report a campaign keeps and signs.
type Kind struct {
	// Name is the first part of its files' names (store.KindAttestation).
	Name string
	// PredicateType is the URI of its predicate, the report's JSON.
	PredicateType string
	// Op is the journal operation that records its reports.
	Op campaign.Op
}

// The kinds of report agentpen signs.
var (
	Attestation = Kind{Name: store.KindAttestation, PredicateType: PredicateAttestation, Op: campaign.OpAttested}
	Cleanup     = Kind{Name: store.KindCleanup, PredicateType: PredicateCleanup, Op: campaign.OpCleanup}
)

// Kinds are the reports agentpen signs. A new kind of report (episode
// results) adds itself here, and its name to store's report names.
var Kinds = []Kind{Attestation, Cleanup}

// KindOf is the kind of report name (a report's file name), or of the
// reports journal op op records (name ""); ok is false for none.
func KindOf(name string, op campaign.Op) (Kind, bool) {
	if name != "" {
		k, _, ok := store.ParseReportName(name)
		if !ok {
			return Kind{}, false
		}
		for _, x := range Kinds {
			if x.Name == k && (op == "" || x.Op == op) {
				return x, true
			}
		}
		return Kind{}, false
	}
	for _, x := range Kinds {
		if x.Op == op {
			return x, true
		}
	}
	return Kind{}, false
}

// Statement is an in-toto Statement v1 whose predicate is P.
type Statement[P any] struct {
	// Type is StatementType.
	Type string `json:"_type"`
	// Subject are the artifacts the predicate speaks of, by digest.
	Subject []Subject `json:"subject"`
	// PredicateType says what the predicate is (PredicateAttestation).
	PredicateType string `json:"predicateType"`
	// Predicate is the report.
	Predicate P `json:"predicate"`
}

// Subject is an in-toto ResourceDescriptor naming one artifact by its
// SHA-256.
type Subject struct {
	// Name is the file's name in the campaign's directory, or an image's
	// reference.
	Name string `json:"name"`
	// Digest holds "sha256": the artifact's SHA-256 in hex.
	Digest map[string]string `json:"digest"`
	// Annotations say more of it: "records" for the journal (how many of
	// its lines the digest covers), "containers" for an image (the
	// subjects running it).
	Annotations map[string]any `json:"annotations,omitempty"`
}

// Annotation keys.
const (
	// AnnotationRecords is the number of the journal's lines a journal
	// subject's digest covers.
	AnnotationRecords = "records"
	// AnnotationContainers lists the containers running an image subject.
	AnnotationContainers = "containers"
)

// SHA256 returns the subject's SHA-256 ("" for none).
func (s Subject) SHA256() string { return s.Digest["sha256"] }

// FileSubject names a file by the SHA-256 of its content.
func FileSubject(name string, content []byte) Subject {
	return Subject{Name: name, Digest: map[string]string{"sha256": digest(content)}}
}

// ImageSubject names an image by its image id ("sha256:..."), and the
// containers that run it.
func ImageSubject(ref, id string, containers []string) (Subject, error) {
	hexID, ok := sha256Hex(id)
	if !ok {
		return Subject{}, fmt.Errorf("image %s: id %q is not sha256:<64 hex>", ref, id)
	}
	return Subject{Name: ref, Digest: map[string]string{"sha256": hexID}, Annotations: map[string]any{AnnotationContainers: containers}}, nil
}

// sha256Hex is the hex of a "sha256:<hex>" id.
func sha256Hex(id string) (string, bool) {
	const p = "sha256:"
	if len(id) != len(p)+64 || id[:len(p)] != p {
		return "", false
	}
	if _, err := hex.DecodeString(id[len(p):]); err != nil {
		return "", false
	}
	return id[len(p):], true
}

// NewStatement is the statement that predicate, of type predicateType,
// speaks of subjects.
func NewStatement[P any](predicateType string, predicate P, subjects ...Subject) Statement[P] {
	return Statement[P]{Type: StatementType, Subject: subjects, PredicateType: predicateType, Predicate: predicate}
}

// Marshal is the statement's JSON, the envelope's payload.
func (s Statement[P]) Marshal() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	return b, nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
