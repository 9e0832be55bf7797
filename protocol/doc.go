// Package protocol holds the nouns and rules of relay, and no I/O: realm
// names and identities, rights, the catalog of stable error reasons, and the
// federation's event — its canonical encoding, content address and signature.
//
// # Terminology
//
//   - Realm: an independent node, named [a-z0-9-]{1,32}, bound to one ed25519
//     key (its libp2p peer ID).
//   - Event: one change authored by one realm: {realm, seq, prev, type, at,
//     author, data, sig}. seq is dense per realm (1, 2, 3 …); prev is the CID
//     of the realm's previous event, so a realm's history is a hash chain.
//   - CID: CIDv1, codec dag-cbor, sha2-256 multihash, of the canonical
//     encoding of the signed event.
//
// # Tricky bits
//
//   - The signature covers the canonical encoding of the event without its
//     sig field; the CID covers the encoding with it. ed25519 signatures are
//     deterministic, so one (key, event) pair has exactly one CID. Sign uses
//     curve25519-voi, which signs in about 60 % of the standard library's
//     time and gives its very signatures (TestSignMatchesStandardLibrary);
//     verification is the standard library's.
//   - Decoding is strict: an input that is not the canonical DAG-CBOR form of
//     its value is refused (ErrNonCanonical, or ErrInvalidEvent when the strict
//     decoder already rejects it: indefinite lengths, duplicate keys, trailing
//     bytes), so no two byte strings ever decode to the same event.
//   - Event data is kept as raw canonical CBOR (a map); each event type owns
//     the Go struct it decodes into. Floats are always 64-bit, integers are
//     shortest, map keys are text and sorted length-first, the only tag is 42
//     (a CID link), NaN and infinities are refused.
package protocol
