// Package custody is the signed record of a campaign's reports: each
// attestation and cleanup report (and, by the same code, any report whose
// predicate plugs in as a Kind) is the predicate of an in-toto Statement
// v1 about the files it speaks for, signed in a DSSE envelope with an
// ed25519 key, and Verify checks a campaign's envelopes, the files their
// subjects name and the journal's hash chain, naming each failure.
//
// A Statement's subjects, each by its SHA-256, are: the report file itself
// (so a verifier of blobs, such as cosign verify-blob-attestation, checks
// the file users read against the signature), the generation's spec, the
// daemon recorded at bring-up, the journal as it was when the report was
// made (its first N lines, N in the subject's annotations), and what the
// kind adds: an attestation each image its containers run (by image id),
// a cleanup the attestation of its generation it follows. The journal's
// record of the report, the line after those N, carries the report's and
// the envelope's digests; so every record of a journal is covered by a
// signature, or is the record of a signed report, or follows the last
// one, and Verify says which.
//
// Statements are written with encoding/json (the in-toto Go bindings are
// protobuf types whose Struct turns every number into a float; the
// bindings' Validate runs in the tests); envelopes are
// github.com/secure-systems-lab/go-securesystemslib/dsse's.
//
// What it does not do: it keeps no key (the state root does:
// store.Root.SigningKey) and writes no file (store.Campaign.WriteEnvelope
// does; the adapter journals); it reads a campaign's files only through
// Files, never following a link. It proves that the holder of the key
// signed a report about those files; it cannot prove the holder told the
// truth, nor that a whole later report with its journal lines was not
// removed by someone who can write the state root (an envelope copied
// elsewhere proves it was there). It never talks to Docker, the network or
// an HTTP stack.
package custody
